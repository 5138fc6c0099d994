/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* member.h: internal interfaces of kvstore-member, a storage member of a kvstore pool. */
#ifndef KVSTORE_MEMBER_H
#define KVSTORE_MEMBER_H

#include <rmr/server.h>

/*
 * Serve one client of the control socket: read one line and answer, then
 * close. "status text" / "status" and "status json" get librmr's server
 * status (rmr_server_status_format); anything else "error: unknown command".
 * Bounded by short socket timeouts.
 */
void member_control_serve(int lfd, struct rmr_server *srv);

#endif
