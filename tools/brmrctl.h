/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmrctl: what its verbs share. A verb is a function
 * `int cmd_NAME(int argc, char **argv)` (argv[0] is the verb) returning the
 * exit status, listed in the verb table of brmrctl.c; each answers --help.
 * Errors are one line on stderr (die()); exit status 2 for usage errors, 1
 * for runtime errors.
 */
#ifndef BRMR_TOOLS_BRMRCTL_H
#define BRMR_TOOLS_BRMRCTL_H

#include <rmr/brmr.h>
#include <rmr/brmr_config.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_USAGE 2
#define EXIT_RUNTIME 1

/* Print "brmrctl: MESSAGE" (plus a --help hint for usage errors); @return @p status. */
int die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A bad pool file: "brmrctl: FILE:LINE: reason", no --help hint. @return 2. */
int config_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The usage error for getopt_long's '?' or ':'. */
int bad_option(int argc, char **argv);
/* "SIZE": bytes with an optional binary suffix K, M, G or T. */
bool parse_size(const char *s, uint64_t *out);
/* A pool name: 1..RMR_NAME_MAX characters of [A-Za-z0-9._-]. */
bool valid_name(const char *name);
/* A member id 1..RMR_MAX_MEMBER_ID. @return it, or 0. */
unsigned parse_member_id(const char *s);

/*
 * A pool file from --config FILE or --pool NAME (exactly one of them set).
 * @return the file (free() it), or NULL after a one-line error with exit
 * status *@p status (2: a bad or missing file).
 */
struct brmr_config *load_pool_file(const char *config, const char *pool, int *status);

/* ---- control sockets ------------------------------------------------------- */

/*
 * Which daemon's control socket a verb talks to: --socket PATH, or from a
 * pool file (--config FILE or --pool NAME) the socket of --member ID or of
 * the client (--client, the default).
 */
struct ctl_target {
	const char *socket;
	const char *config;
	const char *pool;
	const char *member;
	bool client;
};

enum { O_T_SOCKET = 200, O_T_CONFIG, O_T_POOL, O_T_MEMBER, O_T_CLIENT };

/* getopt_long entries of the target options (--member and --client optional). */
#define CTL_TARGET_OPTIONS                                                   \
	{ "socket", required_argument, NULL, O_T_SOCKET },                   \
	{ "config", required_argument, NULL, O_T_CONFIG },                   \
	{ "pool", required_argument, NULL, O_T_POOL }
#define CTL_TARGET_WHO_OPTIONS                                               \
	{ "member", required_argument, NULL, O_T_MEMBER },                   \
	{ "client", no_argument, NULL, O_T_CLIENT }

/* Help lines of the target options. */
#define CTL_TARGET_HELP                                                                \
	"  --socket PATH      the daemon's control socket (brmr-server or nbd-brmr\n"    \
	"                     --control)\n"                                              \
	"  --config FILE      or find it in a pool file (brmr-pool.conf(5)):\n"          \
	"  --pool NAME        or in the pool file DIR/NAME.conf (DIR: $BRMR_CONFIG_DIR\n" \
	"                     or " BRMR_CONFIG_DIR ")\n"
#define CTL_TARGET_WHO_HELP                                                            \
	"  --member ID        with a pool file: member ID's brmr-server\n"               \
	"  --client           with a pool file: the client, nbd-brmr (the default)\n"

/* Take option @p c if it is a target option. @return true if it was. */
bool ctl_target_opt(struct ctl_target *t, int c, const char *arg);
/* The socket path the options name, into @p path. @return 0, or the exit
 * status after a one-line error. */
int ctl_target_socket(const struct ctl_target *t, char *path, size_t len);

/* Send @p cmd (one line) and copy the answer to stdout. An "error: ..."
 * answer becomes our one-line error. @return the exit status. */
int control_request(const char *path, const char *cmd);
/* The same, waiting up to @p secs for the answer (a change that takes time). */
int control_request_wait(const char *path, const char *cmd, unsigned secs);
/* Connect to @p path and send @p cmd. @return the socket, or -(exit status)
 * after a one-line error. */
int control_connect(const char *path, const char *cmd);

/* ---- the verbs -------------------------------------------------------------- */

int cmd_create(int argc, char **argv);
int cmd_replace_member(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_maintenance(int argc, char **argv);
int cmd_add_member(int argc, char **argv);
int cmd_remove_member(int argc, char **argv);
int cmd_resync(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_inspect(int argc, char **argv);

#endif
