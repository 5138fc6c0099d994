/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * brmrctl add-member / remove-member: run-time membership changes, carried
 * out by the pool's client (nbd-brmr) through its control socket. The
 * client holds writes for a moment, the members record the change durably,
 * and a new member copies everything from its peers by itself.
 */
#include "brmrctl.h"

#include <stdlib.h>
#include <string.h>

static void add_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl add-member ID [ADDRESS] (--socket PATH | --config FILE | --pool NAME)\n"
		"\n"
		"Add member ID, whose brmr-server listens at ADDRESS (HOST:PORT) and serves a\n"
		"store formatted for this pool under that id (brmrctl replace-member formats\n"
		"one), to the pool while I/O goes on: every member records that it misses\n"
		"every chunk, and it copies them from its peers by itself. Without ADDRESS,\n"
		"attach a member detached with 'remove-member --detach' again: it copies only\n"
		"what it missed meanwhile. Talks to the client's control socket (nbd-brmr\n"
		"--control); returns once the members took the change.\n"
		"\n"
		CTL_TARGET_HELP);
}

static void remove_usage(FILE *f)
{
	fprintf(f,
		"usage: brmrctl remove-member ID [--detach] (--socket PATH | --config FILE | --pool NAME)\n"
		"\n"
		"Remove member ID from the pool while I/O goes on. Deleted (the default): the\n"
		"members forget it; adding it back later copies everything. With --detach it\n"
		"stays a member out of I/O and the others keep recording what it misses, so\n"
		"that 'add-member ID' copies only that. Refused while a remaining member still\n"
		"misses chunks (the one leaving might hold the only copy), when no other member\n"
		"is normal, or when fewer than min_legs members would stay.\n"
		"\n"
		CTL_TARGET_HELP
		"  --detach           keep its dirty tracking: it is out, not gone\n");
}

/* Options common to both: the target, --detach (remove only) and --help. */
static int membership_verb(int argc, char **argv, bool add)
{
	enum { O_DETACH = 256, O_HELP };
	static const struct option add_opts[] = {
		CTL_TARGET_OPTIONS,
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	static const struct option remove_opts[] = {
		CTL_TARGET_OPTIONS,
		{ "detach", no_argument, NULL, O_DETACH },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_target t = { 0 };
	char path[BRMR_CONFIG_PATH_MAX + 1], cmd[RMR_ADDR_MAX + 64];
	const char *addr = NULL;
	bool detach = false;
	unsigned id;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", add ? add_opts : remove_opts, NULL)) != -1) {
		if (ctl_target_opt(&t, c, optarg))
			continue;
		switch (c) {
		case O_DETACH:
			detach = true;
			break;
		case O_HELP:
			(add ? add_usage : remove_usage)(stdout);
			return 0;
		default:
			return bad_option(argc, argv);
		}
	}
	if (optind >= argc)
		return die(EXIT_USAGE, "%s: say which member id", argv[0]);
	id = parse_member_id(argv[optind]);
	if (!id)
		return die(EXIT_USAGE, "'%s' is not a member id (1..%u)", argv[optind],
			   RMR_MAX_MEMBER_ID);
	optind++;
	if (add && optind < argc) {
		addr = argv[optind++];
		if (!*addr || strlen(addr) > RMR_ADDR_MAX || strpbrk(addr, " \t\n") ||
		    !strchr(addr, ':'))
			return die(EXIT_USAGE, "'%s' is not an address (HOST:PORT)", addr);
	}
	if (optind < argc)
		return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	ret = ctl_target_socket(&t, path, sizeof(path));
	if (ret)
		return ret;
	if (add)
		snprintf(cmd, sizeof(cmd), "add-member %u%s%s\n", id, addr ? " " : "",
			 addr ? addr : "");
	else
		snprintf(cmd, sizeof(cmd), "remove-member %u%s\n", id, detach ? " detach" : "");
	/* The client holds writes, then every member records the change: allow time. */
	return control_request_wait(path, cmd, 120);
}

int cmd_add_member(int argc, char **argv)
{
	return membership_verb(argc, argv, true);
}

int cmd_remove_member(int argc, char **argv)
{
	return membership_verb(argc, argv, false);
}
