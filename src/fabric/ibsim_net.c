/* ibsim_net.c: placeholder, being written. */
