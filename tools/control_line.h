/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * control_line: the daemons' control sockets (brmr-server, nbd-brmr) take
 * one command line per connection. This accepts the connection and reads
 * that line, with socket timeouts so that a silent client cannot stall the
 * daemon.
 */
#ifndef BRMR_TOOLS_CONTROL_LINE_H
#define BRMR_TOOLS_CONTROL_LINE_H

#include <stddef.h>

/*
 * Accept one client on the listening socket @p lfd, and read its command
 * into @p line (@p size bytes) within @p timeout_ms for the whole line (also
 * its send timeout): up to the first line end or end-of-stream, without the
 * line end or trailing blanks. @return the connected socket (the caller answers on it
 * and closes it), or -1 if no client or no usable line came.
 */
int control_accept_line(int lfd, unsigned timeout_ms, char *line, size_t size);

#endif
