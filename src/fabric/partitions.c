/* partitions.c: placeholder, being written. */
