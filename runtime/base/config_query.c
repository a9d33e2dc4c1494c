/* vkrt_version, vkrt_config_has, vkrt_config_value: the source version and the Kconfig symbols, from the table configure
 * generates (gen/vkrt_config/symbols.h), so a caller learns what libvkrt.a was built with
 * without compiling against the generated vkrt/config.h. */
#include <string.h>

#include "vkrt/vkrt.h"
#include "vkrt_config/symbols.h"
#include "vkrt_config/version.h"

const char *vkrt_version(void) { return VKRT_BUILD_VERSION; }

static const struct {
  const char *name; /* without CONFIG_ */
  const char *value;
} symbols[] = {
#define X(name, value) {name, value},
    VKRT_CONFIG_SYMBOLS(X)
#undef X
};

const char *vkrt_config_value(const char *symbol) {
  if (!symbol)
    return NULL;
  if (strncmp(symbol, "CONFIG_", 7) == 0)
    symbol += 7;
  for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++)
    if (strcmp(symbols[i].name, symbol) == 0)
      return symbols[i].value;
  return NULL;
}

bool vkrt_config_has(const char *symbol) {
  const char *value = vkrt_config_value(symbol);
  return value && strcmp(value, "y") == 0;
}
