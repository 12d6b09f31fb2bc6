/* smp.c: placeholder, being written. */
