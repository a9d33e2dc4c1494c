/* Board description from Kconfig and board matching: pure functions over snapshots. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "device/caps.h"

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int vkrt_board_parse_uuids(const char *text, uint8_t uuids[8][16], char *why, size_t why_size) {
  int count = 0;
  const char *p = text ? text : "";
  while (*p == ' ')
    p++;
  if (*p == '\0')
    return 0;
  for (;;) {
    if (count == 8) {
      vkrt_format(why, why_size, "more than 8 device UUIDs in '%s'", text);
      return -1;
    }
    int digits = 0;
    uint8_t uuid[16] = {0};
    while (*p && *p != ',') {
      if (*p == '-' || *p == ' ') { /* allow the 8-4-4-4-12 form and spaces */
        p++;
        continue;
      }
      int d = hex_digit(*p);
      if (d < 0) {
        vkrt_format(why, why_size, "device UUID %d: '%c' is not a hex digit", count, *p);
        return -1;
      }
      if (digits == 32) {
        vkrt_format(why, why_size, "device UUID %d: more than 32 hex digits", count);
        return -1;
      }
      uuid[digits / 2] = (uint8_t)(uuid[digits / 2] | (d << (digits % 2 ? 0 : 4)));
      digits++;
      p++;
    }
    if (digits != 32) {
      vkrt_format(why, why_size, "device UUID %d: %d hex digits, expected 32", count, digits);
      return -1;
    }
    memcpy(uuids[count++], uuid, 16);
    if (*p == '\0')
      return count;
    p++; /* ',' */
  }
}

bool vkrt_board_from_config(struct vkrt_board *out, char *why, size_t why_size) {
  memset(out, 0, sizeof(*out));
  out->name = CONFIG_VKRT_BOARD;
  out->device_count = CONFIG_VKRT_DEVICE_COUNT;
  out->simulated = IS_ENABLED(CONFIG_VKRT_SIMULATED);
  out->rule = VKRT_MATCH_INDEX;
#if IS_ENABLED(CONFIG_VKRT_DEVICE_MATCH_ID)
  out->rule = VKRT_MATCH_ID;
  out->vendor_id = CONFIG_VKRT_DEVICE_VENDOR_ID;
  out->device_id = CONFIG_VKRT_DEVICE_DEVICE_ID;
#endif
#if IS_ENABLED(CONFIG_VKRT_DEVICE_MATCH_UUID)
  out->rule = VKRT_MATCH_UUID;
  int n = vkrt_board_parse_uuids(CONFIG_VKRT_DEVICE_UUIDS, out->uuids, why, why_size);
  if (n < 0)
    return false;
  out->uuid_count = (uint32_t)n;
#endif
  (void)why;
  (void)why_size;
  return true;
}

static void format_uuid(const uint8_t uuid[16], char out[33]) {
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", uuid[i]);
}

/* Appends "[i] name (vendor 0x.. device 0x..)" for every candidate, the "found" half of
 * every mismatch message. */
static void describe_found(const struct vkrt_caps *c, uint32_t n, bool with_uuid, char *buf,
                           size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  if (n == 0) {
    vkrt_format(buf, size, "no Vulkan physical device");
    return;
  }
  for (uint32_t i = 0; i < n && used + 1 < size; i++) {
    char uuid[33];
    format_uuid(c[i].device_uuid, uuid);
    int w = snprintf(buf + used, size - used, "%s[%u] %s (vendor 0x%x device 0x%x%s%s)",
                     i ? ", " : "", c[i].physical_index, c[i].device_name, c[i].vendor_id,
                     c[i].device_id, with_uuid ? " uuid " : "", with_uuid ? uuid : "");
    if (w < 0)
      break;
    used += (size_t)w;
  }
}

static const char *rule_name(enum vkrt_match_rule rule) {
  return rule == VKRT_MATCH_ID ? "by vendor/device id" : rule == VKRT_MATCH_UUID ? "by UUID"
                                                                                 : "by index";
}

bool vkrt_board_match(const struct vkrt_board *board, const struct vkrt_caps *candidates,
                      uint32_t candidate_count, uint32_t out_physical[8], char *why,
                      size_t why_size) {
  char found[768];
  const char *name = board->name ? board->name : "(unnamed)";
  uint32_t need = board->device_count;
  if (need < 1 || need > 8) {
    vkrt_format(why, why_size, "board '%s': device count %u is outside 1..8", name, need);
    return false;
  }
  /* physical devices this board needs: one when simulated, else one per rank */
  uint32_t physical_needed = board->simulated ? 1 : need;

  if (board->explicit_indices) {
    for (uint32_t r = 0; r < need; r++) {
      uint32_t idx = board->indices[board->simulated ? 0 : r];
      if (idx >= candidate_count) {
        describe_found(candidates, candidate_count, false, found, sizeof(found));
        vkrt_format(why, why_size,
                    "board '%s': device %u expected at physical index %u, found %u physical "
                    "device(s): %s",
                    name, r, idx, candidate_count, found);
        return false;
      }
      for (uint32_t q = 0; q < r && !board->simulated; q++) {
        if (board->indices[q] == idx) {
          vkrt_format(why, why_size,
                      "board '%s': devices %u and %u both ask for physical index %u", name, q,
                      r, idx);
          return false;
        }
      }
      out_physical[r] = idx;
    }
    return true;
  }

  uint32_t picked[8];
  uint32_t picked_count = 0;
  switch (board->rule) {
  case VKRT_MATCH_INDEX:
    for (uint32_t i = 0; i < candidate_count && picked_count < physical_needed; i++)
      picked[picked_count++] = i;
    if (picked_count < physical_needed) {
      describe_found(candidates, candidate_count, false, found, sizeof(found));
      vkrt_format(why, why_size,
                  "board '%s' expects %u %sdevice(s) (%s%s), found %u physical device(s): %s",
                  name, need, board->simulated ? "simulated " : "", rule_name(board->rule),
                  board->simulated ? ", on 1 physical device" : "", candidate_count, found);
      return false;
    }
    break;
  case VKRT_MATCH_ID:
    for (uint32_t i = 0; i < candidate_count && picked_count < physical_needed; i++) {
      if (candidates[i].vendor_id != board->vendor_id)
        continue;
      if (board->device_id != 0 && candidates[i].device_id != board->device_id)
        continue;
      picked[picked_count++] = i;
    }
    if (picked_count < physical_needed) {
      describe_found(candidates, candidate_count, false, found, sizeof(found));
      char device[24];
      if (board->device_id)
        vkrt_format(device, sizeof(device), "0x%x", board->device_id);
      else
        vkrt_format(device, sizeof(device), "any");
      vkrt_format(why, why_size,
                  "board '%s' expects %u %sdevice(s) with vendor 0x%x device %s%s, found %u "
                  "matching of %u physical device(s): %s",
                  name, need, board->simulated ? "simulated " : "", board->vendor_id, device,
                  board->simulated ? " (on 1 physical device)" : "", picked_count,
                  candidate_count, found);
      return false;
    }
    break;
  case VKRT_MATCH_UUID:
    if (board->uuid_count < physical_needed) {
      vkrt_format(why, why_size, "board '%s' expects %u device(s) by UUID but lists %u UUID(s)",
                  name, need, board->uuid_count);
      return false;
    }
    for (uint32_t r = 0; r < physical_needed; r++) {
      uint32_t i = 0;
      while (i < candidate_count && memcmp(candidates[i].device_uuid, board->uuids[r], 16) != 0)
        i++;
      if (i == candidate_count) {
        char uuid[33];
        format_uuid(board->uuids[r], uuid);
        describe_found(candidates, candidate_count, true, found, sizeof(found));
        vkrt_format(why, why_size,
                    "board '%s': device %u expected with UUID %s, found %u physical device(s): "
                    "%s",
                    name, r, uuid, candidate_count, found);
        return false;
      }
      for (uint32_t q = 0; q < picked_count; q++) {
        if (picked[q] == i) {
          vkrt_format(why, why_size, "board '%s': devices %u and %u list the same UUID", name,
                      q, r);
          return false;
        }
      }
      picked[picked_count++] = i;
    }
    break;
  default:
    vkrt_format(why, why_size, "board '%s': unknown match rule %d", name, (int)board->rule);
    return false;
  }
  for (uint32_t r = 0; r < need; r++)
    out_physical[r] = picked[board->simulated ? 0 : r];
  return true;
}
