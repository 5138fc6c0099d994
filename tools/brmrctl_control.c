/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmrctl verbs that talk to a daemon's control socket: status, metrics,
 * events, maintenance. Each finds the socket with --socket PATH or in a
 * pool file (see struct ctl_target).
 */
#include "brmrctl.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* --- status ------------------------------------------------------------------ */

static void status_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl status --socket PATH [--json] [--watch [SECONDS]]\n"
		"       brmrctl status --config FILE|--pool NAME [--member ID|--client] [...]\n"
		"\n"
		"Print the status of a brmr-server or nbd-brmr through its control socket.\n"
		"\n"
		CTL_TARGET_HELP
		CTL_TARGET_WHO_HELP
		"  --json             one JSON object instead of a table\n"
		"  --watch [SECONDS]  print it again every SECONDS (default 1, 0.1..3600)\n"
		"                     until interrupted, the screen cleared in between\n"
		"                     when stdout is a terminal\n");
}

int cmd_status(int argc, char **argv)
{
	enum { O_JSON = 256, O_WATCH, O_HELP };
	static const struct option opts[] = {
		CTL_TARGET_OPTIONS,
		CTL_TARGET_WHO_OPTIONS,
		{ "json", no_argument, NULL, O_JSON },
		{ "watch", optional_argument, NULL, O_WATCH },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_target t = { 0 };
	char path[BRMR_CONFIG_PATH_MAX + 1];
	bool json = false;
	double watch = 0;
	char *end;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ctl_target_opt(&t, c, optarg))
			continue;
		switch (c) {
		case O_JSON:
			json = true;
			break;
		case O_WATCH:
			watch = 1;
			/* "--watch 2" as well as "--watch=2": an optional argument may follow. */
			if (!optarg && optind < argc && (isdigit((unsigned char)argv[optind][0]) ||
							 argv[optind][0] == '.'))
				optarg = argv[optind++];
			if (optarg) {
				errno = 0;
				watch = strtod(optarg, &end);
				if (errno || *end || end == optarg || !(watch >= 0.1 && watch <= 3600))
					return die(EXIT_USAGE, "--watch: '%s' is not 0.1..3600 seconds",
						   optarg);
			}
			break;
		case O_HELP:
			status_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	ret = ctl_target_socket(&t, path, sizeof(path));
	if (ret)
		return ret;
	if (!watch)
		return control_request(path, json ? "status json\n" : "status text\n");
	for (;;) {
		struct timespec ts = { .tv_sec = (time_t)watch,
				       .tv_nsec = (long)((watch - (double)(time_t)watch) * 1e9) };

		if (isatty(STDOUT_FILENO))
			fputs("\033[H\033[2J", stdout); /* home, clear */
		ret = control_request(path, json ? "status json\n" : "status text\n");
		if (ret)
			return ret;
		fflush(stdout);
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

/* --- metrics ------------------------------------------------------------------ */

static void metrics_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl metrics --socket PATH\n"
		"       brmrctl metrics --config FILE|--pool NAME [--member ID|--client]\n"
		"\n"
		"Print the counters and gauges of a brmr-server or nbd-brmr in the Prometheus\n"
		"text format (0.0.4): names rmr_client_* and rmr_server_*, labels pool,\n"
		"member and peer. For a node exporter's textfile collector, or to serve over\n"
		"HTTP with any static file server.\n"
		"\n"
		CTL_TARGET_HELP
		CTL_TARGET_WHO_HELP);
}

int cmd_metrics(int argc, char **argv)
{
	enum { O_HELP = 256 };
	static const struct option opts[] = {
		CTL_TARGET_OPTIONS,
		CTL_TARGET_WHO_OPTIONS,
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_target t = { 0 };
	char path[BRMR_CONFIG_PATH_MAX + 1];
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ctl_target_opt(&t, c, optarg))
			continue;
		if (c == O_HELP) {
			metrics_usage(stdout);
			return 0;
		}
		return bad_option(argc, argv);
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	ret = ctl_target_socket(&t, path, sizeof(path));
	if (ret)
		return ret;
	return control_request(path, "status prometheus\n");
}

/* --- events ------------------------------------------------------------------- */

static void events_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl events --socket PATH [--now]\n"
		"       brmrctl events --config FILE|--pool NAME [--member ID|--client] [--now]\n"
		"\n"
		"Print the state changes of a brmr-server or nbd-brmr as they happen, one JSON\n"
		"object a line (like drbdsetup events2): first one \"exists\" line per object\n"
		"with its current state, then an \"exists-done\" line, then one \"change\" line\n"
		"per event. Every line has \"time\" (UTC), \"role\" (client or member),\n"
		"\"type\", and most have \"kind\" (pool, member_state, dirty_tracking, resync,\n"
		"map_update, verify), \"pool\" and \"member\". Runs until interrupted; exits 1\n"
		"if the daemon ends the stream (it stopped, or dropped a listener that read\n"
		"too slowly).\n"
		"\n"
		CTL_TARGET_HELP
		CTL_TARGET_WHO_HELP
		"  --now              print the current state (up to \"exists-done\") and exit\n");
}

int cmd_events(int argc, char **argv)
{
	enum { O_NOW = 256, O_HELP };
	static const struct option opts[] = {
		CTL_TARGET_OPTIONS,
		CTL_TARGET_WHO_OPTIONS,
		{ "now", no_argument, NULL, O_NOW },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_target t = { 0 };
	char path[BRMR_CONFIG_PATH_MAX + 1], *line = NULL;
	size_t cap = 0;
	bool now = false, first = true;
	FILE *in;
	int c, fd, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ctl_target_opt(&t, c, optarg))
			continue;
		switch (c) {
		case O_NOW:
			now = true;
			break;
		case O_HELP:
			events_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	ret = ctl_target_socket(&t, path, sizeof(path));
	if (ret)
		return ret;
	fd = control_connect(path, now ? "events now\n" : "events\n");
	if (fd < 0)
		return -fd;
	if (now) {
		/* A snapshot: a hung daemon must not hang the shell. A stream
		 * waits as long as nothing happens. */
		struct timeval tv = { .tv_sec = 10 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	in = fdopen(fd, "r");
	if (!in) {
		close(fd);
		return die(EXIT_RUNTIME, "%s: %s", path, strerror(errno));
	}
	for (;;) {
		ssize_t n = getline(&line, &cap, in);

		if (n < 0) {
			int err = ferror(in) ? errno : 0;

			fclose(in);
			free(line);
			if (err)
				return die(EXIT_RUNTIME, "reading from %s: %s", path,
					   err == EAGAIN ? "timed out" : strerror(err));
			return die(EXIT_RUNTIME, "%s: the event stream ended (the daemon stopped, "
				   "or dropped this listener)", path);
		}
		if (first && !strncmp(line, "error:", 6)) {
			line[strcspn(line, "\n")] = '\0';
			fclose(in);
			ret = die(EXIT_RUNTIME, "%s: %s", path, line);
			free(line);
			return ret;
		}
		first = false;
		/* Line by line, so that a pipe sees each event when it happens. */
		if (fputs(line, stdout) == EOF || fflush(stdout) == EOF) {
			fclose(in);
			free(line);
			return EXIT_RUNTIME;
		}
		if (now && strstr(line, "\"type\":\"exists-done\"")) {
			fclose(in);
			free(line);
			return 0;
		}
	}
}

/* --- maintenance --------------------------------------------------------------- */

static void maintenance_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl maintenance on|off --socket PATH --member ID\n"
		"       brmrctl maintenance on|off --config FILE|--pool NAME --member ID\n"
		"\n"
		"Take a member out of I/O (on), or put it back (off), through the control\n"
		"socket of the client (nbd-brmr --control; with a pool file, its [client]\n"
		"control socket). While it is out, every write is recorded as missed by it;\n"
		"when it comes back it takes the dirty maps and copies what it missed from\n"
		"its peers by itself.\n"
		"\n"
		CTL_TARGET_HELP
		"  --member ID        the member id (1..%u)\n",
		RMR_MAX_MEMBER_ID);
}

int cmd_maintenance(int argc, char **argv)
{
	enum { O_MEMBER = 256, O_HELP };
	static const struct option opts[] = {
		CTL_TARGET_OPTIONS,
		{ "member", required_argument, NULL, O_MEMBER },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_target t = { 0 };
	char path[BRMR_CONFIG_PATH_MAX + 1], cmd[64];
	const char *onoff;
	unsigned id = 0;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ctl_target_opt(&t, c, optarg))
			continue;
		switch (c) {
		case O_MEMBER:
			id = parse_member_id(optarg);
			if (!id)
				return die(EXIT_USAGE, "--member: '%s' is not a member id (1..%u)",
					   optarg, RMR_MAX_MEMBER_ID);
			break;
		case O_HELP:
			maintenance_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind >= argc)
		return die(EXIT_USAGE, "maintenance: say 'on' or 'off'");
	onoff = argv[optind++];
	if (strcmp(onoff, "on") && strcmp(onoff, "off"))
		return die(EXIT_USAGE, "maintenance: '%s' is neither 'on' nor 'off'", onoff);
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (!id)
		return die(EXIT_USAGE, "--member is required");
	/* The member to maintain is named by --member; the socket is the client's. */
	ret = ctl_target_socket(&t, path, sizeof(path));
	if (ret)
		return ret;
	snprintf(cmd, sizeof(cmd), "maintenance %s %u\n", onoff, id);
	return control_request(path, cmd);
}
