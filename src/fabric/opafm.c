/* opafm.c: placeholder, being written. */
