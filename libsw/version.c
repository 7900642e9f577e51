/* SPDX-License-Identifier: Apache-2.0 */
/* Runtime version of the loaded library. */
#include "internal.h"

SW_API uint32_t sw_version(void) { return SW_VERSION_HEX; }
SW_API const char *sw_version_string(void) { return SW_VERSION_STRING; }
