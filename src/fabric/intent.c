/* intent.c: placeholder, being written. */
