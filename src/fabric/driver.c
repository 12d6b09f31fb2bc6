/* driver.c: placeholder, being written. */
