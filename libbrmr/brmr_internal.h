/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by libbrmr's source files. */
#ifndef BRMR_INTERNAL_H
#define BRMR_INTERNAL_H

/* Marks a symbol of the public API; everything else is hidden. */
#define BRMR_EXPORT __attribute__((visibility("default")))

#endif
