/* hello: open the board's appliance, print what it found, close it. */
#include <stdio.h>
#include <stdlib.h>

#include <vkrt/vkrt.h>

int main(void) {
  vkrt_options options;
  vkrt_options_initialize(&options);
  vkrt_appliance *app = NULL;
  char why[512];
  vkrt_status s = vkrt_open(&options, &app, why, sizeof why);
  if (s != VKRT_OK) {
    fprintf(stderr, "hello: vkrt_open: %s: %s\n", vkrt_status_str(s), why);
    return 1;
  }
  size_t need = vkrt_describe(app, false, NULL, 0);
  char *text = malloc(need + 1);
  if (!text) {
    vkrt_close(app);
    return 1;
  }
  vkrt_describe(app, false, text, need + 1);
  fputs(text, stdout);
  printf("hello: %u devices, transport %s\n", vkrt_device_count(app),
         vkrt_transport_str(vkrt_transport(app)));
  free(text);
  vkrt_close(app);
  return 0;
}
