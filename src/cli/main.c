#include <stdio.h>

#include "core/log.h"

int main(int argc, char **argv) {
  ct_log_init_from_env();
  fprintf(stderr, "cortado: no commands yet\n");
  return argc > 1 ? 1 : 0;
}
