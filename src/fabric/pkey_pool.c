/* pkey_pool.c: placeholder, being written. */
