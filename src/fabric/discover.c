/* discover.c: placeholder, being written. */
