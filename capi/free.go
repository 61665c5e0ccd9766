package main

// The free functions are plain C, so freeing what the library returned never enters the Go
// runtime: a call into Go from a thread Go did not start first needs a free Go processor,
// and waits for one while Go is busy. (A file with //export may not define C functions.)

/*
#include <stdlib.h>
#include "focus.h"

void focus_string_free(char *s) { free(s); }
void focus_buffer_free(void *p) { free(p); }
*/
import "C"
