/* sim_driver.c: placeholder, being written. */
