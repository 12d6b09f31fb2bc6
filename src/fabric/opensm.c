/* opensm.c: placeholder, being written. */
