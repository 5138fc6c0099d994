/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmrctl resync / verify: act on one member's background work through its
 * brmr-server's control socket. Progress shows in `brmrctl status`.
 */
#include "brmrctl.h"

#include <inttypes.h>
#include <string.h>

static void resync_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl resync stop|start|rate BYTES-PER-S TARGET [--name POOL]\n"
		"\n"
		"stop:  pause the member's background resync (I/O that touches a chunk it\n"
		"       missed still copies that chunk first, so I/O goes on);\n"
		"start: resume it;\n"
		"rate:  limit it to BYTES-PER-S (suffix K, M, G allowed; 0: no limit).\n"
		"Neither survives a restart of the member (the pool file's resync_rate does).\n"
		"\n"
		"TARGET is the member's brmr-server:\n"
		CTL_TARGET_HELP
		"  --member ID        with a pool file: member ID's brmr-server (required)\n"
		"  --name POOL        the pool, when the server serves several\n");
}

static void verify_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl verify [--repair | --stop] TARGET [--name POOL]\n"
		"\n"
		"Start an online verify on a member that holds every chunk (the reference):\n"
		"it compares the checksums of its chunks with those its peers compute, storage\n"
		"to storage, while I/O goes on. 'brmrctl status' shows its progress and the\n"
		"chunks found to differ. With --repair those chunks are marked dirty for the\n"
		"members that differ, which copy them again from the reference. --stop stops\n"
		"a running verify.\n"
		"\n"
		"TARGET is the member's brmr-server:\n"
		CTL_TARGET_HELP
		"  --member ID        with a pool file: member ID's brmr-server (required)\n"
		"  --name POOL        the pool, when the server serves several\n");
}

/* The target must be a member: --socket, or a pool file with --member. */
static int member_socket(const struct ctl_target *t, char *path, size_t len)
{
	if (!t->socket && !t->member)
		return die(EXIT_USAGE, "say which member: --member ID (or --socket PATH)");
	if (t->client)
		return die(EXIT_USAGE, "--client: this acts on a member's brmr-server");
	return ctl_target_socket(t, path, len);
}

static int send_action(const struct ctl_target *t, const char *what, const char *name)
{
	char path[BRMR_CONFIG_PATH_MAX + 1], cmd[256];
	int ret = member_socket(t, path, sizeof(path));

	if (ret)
		return ret;
	/* With --pool NAME the pool file names the pool: act on that one. */
	if (!name)
		name = t->pool;
	snprintf(cmd, sizeof(cmd), "%s%s%s\n", what, name ? " " : "", name ? name : "");
	return control_request(path, cmd);
}

int cmd_resync(int argc, char **argv)
{
	enum { O_NAME = 256, O_HELP };
	static const struct option opts[] = {
		CTL_TARGET_OPTIONS,
		CTL_TARGET_WHO_OPTIONS,
		{ "name", required_argument, NULL, O_NAME },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_target t = { 0 };
	const char *name = NULL, *what;
	char action[64];
	uint64_t rate;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ctl_target_opt(&t, c, optarg))
			continue;
		switch (c) {
		case O_NAME:
			if (!valid_name(optarg))
				return die(EXIT_USAGE, "--name: '%s' is not a pool name", optarg);
			name = optarg;
			break;
		case O_HELP:
			resync_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind >= argc)
		return die(EXIT_USAGE, "resync: say 'stop', 'start' or 'rate BYTES-PER-S'");
	what = argv[optind++];
	if (!strcmp(what, "rate")) {
		if (optind >= argc)
			return die(EXIT_USAGE, "resync rate: say how many bytes per second");
		if (!parse_size(argv[optind], &rate))
			return die(EXIT_USAGE, "resync rate: '%s' is not a size (e.g. 50M)",
				   argv[optind]);
		optind++;
		snprintf(action, sizeof(action), "resync rate %" PRIu64, rate);
	} else if (!strcmp(what, "stop") || !strcmp(what, "start")) {
		snprintf(action, sizeof(action), "resync %s", what);
	} else {
		return die(EXIT_USAGE, "resync: '%s' is none of stop, start, rate", what);
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	return send_action(&t, action, name);
}

int cmd_verify(int argc, char **argv)
{
	enum { O_REPAIR = 256, O_STOP, O_NAME, O_HELP };
	static const struct option opts[] = {
		CTL_TARGET_OPTIONS,
		CTL_TARGET_WHO_OPTIONS,
		{ "repair", no_argument, NULL, O_REPAIR },
		{ "stop", no_argument, NULL, O_STOP },
		{ "name", required_argument, NULL, O_NAME },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_target t = { 0 };
	const char *name = NULL;
	bool repair = false, stop = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ctl_target_opt(&t, c, optarg))
			continue;
		switch (c) {
		case O_REPAIR:
			repair = true;
			break;
		case O_STOP:
			stop = true;
			break;
		case O_NAME:
			if (!valid_name(optarg))
				return die(EXIT_USAGE, "--name: '%s' is not a pool name", optarg);
			name = optarg;
			break;
		case O_HELP:
			verify_usage(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (repair && stop)
		return die(EXIT_USAGE, "--repair and --stop contradict each other");
	return send_action(&t, stop ? "verify stop" : repair ? "verify repair" : "verify", name);
}
