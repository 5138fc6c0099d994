/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pool configuration file (see include/rmr/brmr_config.h and the
 * brmr-pool.conf(5) manual page): an INI-like text, parsed in one pass over
 * the lines, then checked as a whole. Every refusal names its file and line:
 * an operator who edits one file for a whole cluster must be able to find
 * the mistake without reading the source.
 */
#include <rmr/brmr.h>
#include <rmr/brmr_config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brmr_internal.h"

#define DEF_CHUNK (128u * 1024)
#define DEF_QUEUE_DEPTH 128
#define DEF_SYNC_QUEUE_DEPTH 32
#define DEF_HEARTBEAT_MS 250
#define DEF_FAILURE_MS 2000
#define DEF_REQUEST_MS 10000
#define DEF_POLL_US 100

/* Sections: the pool, the client, then one slot per member in file order. */
enum section { SEC_NONE = -1, SEC_POOL = 0, SEC_CLIENT = 1, SEC_MEMBER0 = 2 };
#define NSECTIONS (SEC_MEMBER0 + RMR_MAX_MEMBERS)

enum key_id {
	/* [pool] */
	K_NAME, K_UUID, K_SIZE, K_CHUNK, K_TRANSPORT, K_PROVIDER, K_MIN_LEGS, K_QUEUE_DEPTH,
	K_SYNC_QUEUE_DEPTH, K_RESYNC_RATE, K_HEARTBEAT, K_FAILURE, K_REQUEST, K_KEY_FILE,
	/* [member ID] */
	K_ADDRESS, K_STORE, K_MEMBER_CONTROL,
	/* [client] */
	K_SOCKET, K_TCP, K_CLIENT_CONTROL, K_POLL,
	K_COUNT
};

enum section_kind { IN_POOL, IN_MEMBER, IN_CLIENT };

static const struct key_def {
	const char *name;
	enum section_kind in;
} keys[K_COUNT] = {
	[K_NAME] = { "name", IN_POOL },
	[K_UUID] = { "uuid", IN_POOL },
	[K_SIZE] = { "size", IN_POOL },
	[K_CHUNK] = { "chunk_size", IN_POOL },
	[K_TRANSPORT] = { "transport", IN_POOL },
	[K_PROVIDER] = { "provider", IN_POOL },
	[K_MIN_LEGS] = { "min_legs", IN_POOL },
	[K_QUEUE_DEPTH] = { "queue_depth", IN_POOL },
	[K_SYNC_QUEUE_DEPTH] = { "sync_queue_depth", IN_POOL },
	[K_RESYNC_RATE] = { "resync_rate", IN_POOL },
	[K_HEARTBEAT] = { "heartbeat_ms", IN_POOL },
	[K_FAILURE] = { "failure_timeout_ms", IN_POOL },
	[K_REQUEST] = { "request_timeout_ms", IN_POOL },
	[K_KEY_FILE] = { "key_file", IN_POOL },
	[K_ADDRESS] = { "address", IN_MEMBER },
	[K_STORE] = { "store", IN_MEMBER },
	[K_MEMBER_CONTROL] = { "control", IN_MEMBER },
	[K_SOCKET] = { "socket", IN_CLIENT },
	[K_TCP] = { "tcp", IN_CLIENT },
	[K_CLIENT_CONTROL] = { "control", IN_CLIENT },
	[K_POLL] = { "poll_us", IN_CLIENT },
};

static const char *const section_names[] = {
	[IN_POOL] = "[pool]",
	[IN_MEMBER] = "[member ID]",
	[IN_CLIENT] = "[client]",
};

struct parser {
	const char *file;
	struct brmr_config *cfg;
	char *err;
	size_t errlen;
	unsigned line;                     /* current line, from 1 */
	unsigned last_line;                /* lines in the file */
	int sec;                           /* enum section or a member slot */
	unsigned client_line;              /* line of [client], 0 if none */
	unsigned seen[NSECTIONS][K_COUNT]; /* line where each key was set, 0 if not */
};

__attribute__((format(printf, 3, 4)))
static int fail_at(struct parser *p, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (p->err && p->errlen) {
		n = snprintf(p->err, p->errlen, "%s:%u: ", p->file, line ? line : 1);
		if (n >= 0 && (size_t)n < p->errlen) {
			va_start(ap, fmt);
			vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

/* ---- values ---------------------------------------------------------------- */

/* Decimal digits only: no sign, no blanks, no hex. */
static bool parse_u64(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	*end = s;
	return true;
}

/* Bytes with an optional binary suffix K, M, G or T (either case). */
static bool parse_bytes(const char *s, uint64_t *out)
{
	const char *end;
	unsigned shift = 0;
	uint64_t v;

	if (!parse_u64(s, &v, &end))
		return false;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	default: return false;
	}
	if (shift && end[1])
		return false;
	if (v > (UINT64_MAX >> shift))
		return false;
	*out = v << shift;
	return true;
}

static bool valid_pool_name(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= RMR_NAME_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* Copy @p v into a field of @p cap bytes. */
static int set_str(struct parser *p, const char *key, char *dst, size_t cap, const char *v)
{
	size_t n = strlen(v);

	if (n >= cap)
		return fail_at(p, p->line, "%s: value longer than %zu bytes", key, cap - 1);
	memcpy(dst, v, n + 1);
	return 0;
}

static int set_uint(struct parser *p, const char *key, const char *v, uint64_t min, uint64_t max,
		    unsigned *out)
{
	const char *end;
	uint64_t x;

	if (!parse_u64(v, &x, &end) || *end || x < min || x > max)
		return fail_at(p, p->line, "%s: '%s' is not a whole number in %llu..%llu", key, v,
			       (unsigned long long)min, (unsigned long long)max);
	*out = (unsigned)x;
	return 0;
}

static int set_path(struct parser *p, const char *key, char *dst, size_t cap, const char *v)
{
	if (v[0] != '/')
		return fail_at(p, p->line, "%s: '%s' is not an absolute path", key, v);
	return set_str(p, key, dst, cap, v);
}

/* A member address: printable ASCII without blanks (as in a store's superblock). */
static int set_address(struct parser *p, const char *key, char *dst, size_t cap, const char *v)
{
	for (const char *c = v; *c; c++)
		if (*c <= ' ' || *c > '~')
			return fail_at(p, p->line, "%s: '%s' has a blank or a non-ASCII character",
				       key, v);
	return set_str(p, key, dst, cap, v);
}

/* HOST:PORT, [V6]:PORT or :PORT, with a numeric port. */
static int set_hostport(struct parser *p, const char *key, char *dst, size_t cap, const char *v)
{
	const char *colon = strrchr(v, ':'), *end;
	uint64_t port;

	if (!colon || !parse_u64(colon + 1, &port, &end) || *end || port > 65535 ||
	    (v[0] == '[' && (colon == v || colon[-1] != ']')))
		return fail_at(p, p->line, "%s: '%s' is not HOST:PORT", key, v);
	return set_address(p, key, dst, cap, v);
}

static int set_value(struct parser *p, enum key_id k, const char *v)
{
	struct brmr_config *c = p->cfg;
	struct brmr_config_member *m = p->sec >= SEC_MEMBER0 ? &c->members[p->sec - SEC_MEMBER0] : NULL;
	const char *key = keys[k].name;
	uint64_t x;

	switch (k) {
	case K_NAME:
		if (!valid_pool_name(v))
			return fail_at(p, p->line, "name: '%s' is not 1..%u characters of [A-Za-z0-9._-]",
				       v, RMR_NAME_MAX);
		return set_str(p, key, c->name, sizeof(c->name), v);
	case K_UUID: {
		static const rmr_uuid zero;

		if (rmr_uuid_parse(v, &c->uuid) < 0)
			return fail_at(p, p->line, "uuid: '%s' is not a UUID "
				       "(8-4-4-4-12 hexadecimal digits)", v);
		if (!memcmp(&c->uuid, &zero, sizeof(zero)))
			return fail_at(p, p->line, "uuid: the nil UUID is not a pool UUID");
		return 0;
	}
	case K_SIZE:
		if (!parse_bytes(v, &x) || x == 0)
			return fail_at(p, p->line, "size: '%s' is not a size (bytes, or with a "
				       "K, M, G or T suffix)", v);
		if (x % 4096)
			return fail_at(p, p->line, "size: %s is not a multiple of 4096 bytes", v);
		c->pool_size = x;
		return 0;
	case K_CHUNK:
		if (!parse_bytes(v, &x) || x < BRMR_CHUNK_MIN || x > BRMR_CHUNK_MAX || (x & (x - 1)))
			return fail_at(p, p->line, "chunk_size: '%s' is not a power of two "
				       "in 128K..1M", v);
		c->chunk_size = (uint32_t)x;
		return 0;
	case K_TRANSPORT:
		if (strcmp(v, "fabric") && strcmp(v, "mem"))
			return fail_at(p, p->line, "transport: '%s' is not fabric or mem", v);
		return set_str(p, key, c->transport, sizeof(c->transport), v);
	case K_PROVIDER:
		if (strcmp(v, "tcp") && strcmp(v, "shm") && strcmp(v, "verbs"))
			return fail_at(p, p->line, "provider: '%s' is not tcp, shm or verbs", v);
		return set_str(p, key, c->provider, sizeof(c->provider), v);
	case K_MIN_LEGS:
		return set_uint(p, key, v, 1, RMR_MAX_MEMBERS, &c->min_legs);
	case K_QUEUE_DEPTH:
		/* One slot is the client's own (rmr_client_opts.volatile_writes). */
		return set_uint(p, key, v, 2, 1024, &c->queue_depth);
	case K_SYNC_QUEUE_DEPTH:
		return set_uint(p, key, v, 1, 256, &c->sync_queue_depth);
	case K_RESYNC_RATE:
		if (!parse_bytes(v, &c->resync_rate))
			return fail_at(p, p->line, "resync_rate: '%s' is not a rate (bytes per "
				       "second, or with a K, M or G suffix; 0 = unlimited)", v);
		return 0;
	case K_HEARTBEAT:
		return set_uint(p, key, v, 10, 60000, &c->heartbeat_ms);
	case K_FAILURE:
		return set_uint(p, key, v, 20, 600000, &c->failure_timeout_ms);
	case K_REQUEST:
		return set_uint(p, key, v, 100, 3600000, &c->request_timeout_ms);
	case K_KEY_FILE:
		/* Relative: to the pool file's directory (resolved in check_whole). */
		c->key_file_set = true;
		return set_str(p, key, c->key_file, sizeof(c->key_file), v);
	case K_ADDRESS:
		return set_address(p, key, m->address, sizeof(m->address), v);
	case K_STORE:
		return set_path(p, key, m->store, sizeof(m->store), v);
	case K_MEMBER_CONTROL:
		return set_path(p, key, m->control, sizeof(m->control), v);
	case K_SOCKET:
		return set_path(p, key, c->client_socket, sizeof(c->client_socket), v);
	case K_TCP:
		return set_hostport(p, key, c->client_tcp, sizeof(c->client_tcp), v);
	case K_CLIENT_CONTROL:
		return set_path(p, key, c->client_control, sizeof(c->client_control), v);
	case K_POLL:
		return set_uint(p, key, v, 0, 1000, &c->poll_us);
	case K_COUNT:
		break;
	}
	return fail_at(p, p->line, "internal error: key %d", (int)k);
}

/* ---- lines ------------------------------------------------------------------- */

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	return s;
}

/* Cut a comment off a value: ';' or '#' at its start or after a blank. */
static void cut_comment(char *s)
{
	for (char *c = s; *c; c++)
		if ((*c == ';' || *c == '#') && (c == s || c[-1] == ' ' || c[-1] == '\t')) {
			*c = '\0';
			return;
		}
}

static int section_line(struct parser *p, char *s)
{
	struct brmr_config *c = p->cfg;
	char *close = strchr(s, ']'), *word, *arg;
	const char *end;
	uint64_t id;

	if (!close)
		return fail_at(p, p->line, "section header without ']'");
	*close = '\0';
	cut_comment(close + 1);
	if (*trim(close + 1))
		return fail_at(p, p->line, "text after the section header: '%s'", trim(close + 1));
	word = trim(s + 1);
	arg = word + strcspn(word, " \t");
	if (*arg)
		*arg++ = '\0';
	arg = trim(arg);

	if (!strcmp(word, "pool") || !strcmp(word, "client")) {
		bool pool = word[0] == 'p';
		unsigned *first = pool ? &c->line : &p->client_line;

		if (*arg)
			return fail_at(p, p->line, "[%s] takes no argument: '%s'", word, arg);
		if (*first)
			return fail_at(p, p->line, "a second [%s] section (the first is on line %u)",
				       word, *first);
		*first = p->line;
		p->sec = pool ? SEC_POOL : SEC_CLIENT;
		return 0;
	}
	if (strcmp(word, "member"))
		return fail_at(p, p->line, "unknown section [%s%s%s] (sections: [pool], "
			       "[member ID], [client])", word, *arg ? " " : "", arg);
	if (!*arg)
		return fail_at(p, p->line, "[member] needs a member id: [member ID]");
	if (!parse_u64(arg, &id, &end) || *end || id < 1 || id > RMR_MAX_MEMBER_ID)
		return fail_at(p, p->line, "[member %s]: the member id must be 1..%u", arg,
			       RMR_MAX_MEMBER_ID);
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].id == id)
			return fail_at(p, p->line, "a second [member %u] section (the first is on "
				       "line %u)", (unsigned)id, c->members[i].line);
	if (c->nmembers == RMR_MAX_MEMBERS)
		return fail_at(p, p->line, "more than %u members", RMR_MAX_MEMBERS);
	c->members[c->nmembers].id = (uint16_t)id;
	c->members[c->nmembers].line = p->line;
	p->sec = SEC_MEMBER0 + (int)c->nmembers++;
	return 0;
}

static enum section_kind sec_kind(int sec)
{
	return sec == SEC_POOL ? IN_POOL : sec == SEC_CLIENT ? IN_CLIENT : IN_MEMBER;
}

static int key_line(struct parser *p, char *s)
{
	char *eq = strchr(s, '='), *key, *val;
	enum section_kind in = sec_kind(p->sec);
	int other = -1;

	if (!eq)
		return fail_at(p, p->line, "expected 'key = value' or a [section]: '%s'", s);
	*eq = '\0';
	key = trim(s);
	val = eq + 1;
	cut_comment(val);
	val = trim(val);
	if (!*key)
		return fail_at(p, p->line, "a value without a key");
	if (strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(key))
		return fail_at(p, p->line, "'%s' is not a key (lower-case letters, digits, '_')", key);
	if (p->sec == SEC_NONE)
		return fail_at(p, p->line, "key '%s' before the first section", key);
	for (int k = 0; k < K_COUNT; k++) {
		if (strcmp(keys[k].name, key))
			continue;
		if (keys[k].in != in) {
			if (other < 0)
				other = k;
			continue;
		}
		if (p->seen[p->sec][k])
			return fail_at(p, p->line, "'%s' is set twice in this section (first on "
				       "line %u)", key, p->seen[p->sec][k]);
		if (!*val)
			return fail_at(p, p->line, "%s: empty value", key);
		p->seen[p->sec][k] = p->line;
		return set_value(p, (enum key_id)k, val);
	}
	if (other >= 0)
		return fail_at(p, p->line, "key '%s' belongs in a %s section, not in %s", key,
			       section_names[keys[other].in], section_names[in]);
	return fail_at(p, p->line, "unknown key '%s' in %s", key, section_names[in]);
}

/* ---- the file as a whole ----------------------------------------------------- */

/* The line a key was set on, or else the line of its section. */
static unsigned line_of(const struct parser *p, int sec, enum key_id k)
{
	if (p->seen[sec][k])
		return p->seen[sec][k];
	if (sec == SEC_POOL)
		return p->cfg->line;
	if (sec == SEC_CLIENT)
		return p->client_line;
	return p->cfg->members[sec - SEC_MEMBER0].line;
}

/*
 * The key file: as given if absolute, else in the pool file's directory
 * (NAME.key there when the file names none). A pool file read from "-" is
 * in the current directory.
 */
static int resolve_key_file(struct parser *p)
{
	struct brmr_config *c = p->cfg;
	char rel[BRMR_CONFIG_PATH_MAX + 1];
	const char *slash = strrchr(p->file, '/');
	int dirlen = slash ? (int)(slash - p->file) : 0;
	int n;

	if (c->key_file_set)
		snprintf(rel, sizeof(rel), "%s", c->key_file);
	else
		snprintf(rel, sizeof(rel), "%s.key", c->name);
	if (rel[0] == '/')
		return 0;
	if (!slash || !strcmp(p->file, "-"))
		n = snprintf(c->key_file, sizeof(c->key_file), "%s", rel);
	else if (dirlen == 0)
		n = snprintf(c->key_file, sizeof(c->key_file), "/%s", rel);
	else
		n = snprintf(c->key_file, sizeof(c->key_file), "%.*s/%s", dirlen, p->file, rel);
	if (n < 0 || (size_t)n >= sizeof(c->key_file))
		return fail_at(p, line_of(p, SEC_POOL, K_KEY_FILE), "key_file: the path is too long");
	return 0;
}

static int check_whole(struct parser *p)
{
	struct brmr_config *c = p->cfg;
	int n;

	if (!c->line)
		return fail_at(p, p->last_line, "no [pool] section");
	if (!c->name[0])
		return fail_at(p, c->line, "[pool] has no 'name'");
	if (!p->seen[SEC_POOL][K_UUID])
		return fail_at(p, c->line, "[pool] has no 'uuid' (every host must use the same "
			       "one: generate it once, e.g. with uuidgen)");
	if (!c->pool_size)
		return fail_at(p, c->line, "[pool] has no 'size'");
	if (!c->nmembers)
		return fail_at(p, c->line, "the pool has no members: add a [member ID] section "
			       "per member");
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct brmr_config_member *m = &c->members[i];
		int sec = SEC_MEMBER0 + (int)i;

		if (!m->address[0])
			return fail_at(p, m->line, "[member %u] has no 'address'", m->id);
		if (!m->store[0])
			return fail_at(p, m->line, "[member %u] has no 'store'", m->id);
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(c->members[j].address, m->address))
				return fail_at(p, line_of(p, sec, K_ADDRESS),
					       "members %u and %u have the same address %s",
					       c->members[j].id, m->id, m->address);
		if (!m->control[0]) {
			n = snprintf(m->control, sizeof(m->control), "%s/%s-m%u.ctl", BRMR_RUN_DIR,
				     c->name, m->id);
			if (n < 0 || (size_t)n >= sizeof(m->control))
				return fail_at(p, m->line, "the default control path is too long");
		}
	}
	for (unsigned i = 0; i < c->nmembers; i++)
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(c->members[j].control, c->members[i].control))
				return fail_at(p, line_of(p, SEC_MEMBER0 + (int)i, K_MEMBER_CONTROL),
					       "members %u and %u have the same control socket %s",
					       c->members[j].id, c->members[i].id,
					       c->members[i].control);
	if (c->min_legs > c->nmembers)
		return fail_at(p, line_of(p, SEC_POOL, K_MIN_LEGS),
			       "min_legs %u is more than the %u member%s of the pool", c->min_legs,
			       c->nmembers, c->nmembers == 1 ? "" : "s");
	if (c->failure_timeout_ms < 2 * c->heartbeat_ms) {
		enum key_id k = p->seen[SEC_POOL][K_FAILURE] ? K_FAILURE : K_HEARTBEAT;

		return fail_at(p, line_of(p, SEC_POOL, k),
			       "failure_timeout_ms %u is shorter than two heartbeats (heartbeat_ms %u)",
			       c->failure_timeout_ms, c->heartbeat_ms);
	}
	if (p->seen[SEC_CLIENT][K_SOCKET] && p->seen[SEC_CLIENT][K_TCP]) {
		unsigned a = p->seen[SEC_CLIENT][K_SOCKET], b = p->seen[SEC_CLIENT][K_TCP];

		return fail_at(p, a > b ? a : b, "[client] has both 'socket' and 'tcp' (line %u): "
			       "nbd-brmr listens on one of them", a > b ? b : a);
	}
	if (!c->client_tcp[0] && !c->client_socket[0])
		snprintf(c->client_socket, sizeof(c->client_socket), "%s/%s.nbd.sock", BRMR_RUN_DIR,
			 c->name);
	if (!c->client_control[0])
		snprintf(c->client_control, sizeof(c->client_control), "%s/%s-client.ctl",
			 BRMR_RUN_DIR, c->name);
	for (unsigned i = 0; i < c->nmembers; i++)
		if (!strcmp(c->members[i].control, c->client_control))
			return fail_at(p, line_of(p, SEC_CLIENT, K_CLIENT_CONTROL),
				       "the client and member %u have the same control socket %s",
				       c->members[i].id, c->client_control);
	if (c->client_socket[0] && !strcmp(c->client_socket, c->client_control))
		return fail_at(p, line_of(p, SEC_CLIENT, K_SOCKET),
			       "the NBD socket and the control socket are both %s", c->client_socket);
	return resolve_key_file(p);
}

BRMR_EXPORT int brmr_config_parse(const char *file, const char *buf, size_t len,
				 struct brmr_config *cfg, char *err, size_t errlen)
{
	struct parser *p;
	char *line = NULL;
	size_t pos = 0;
	int ret = 0;

	if (err && errlen)
		err[0] = '\0';
	if (!file)
		file = "-";
	if (!cfg || cfg->size < sizeof(*cfg) || (!buf && len)) {
		if (err && errlen)
			snprintf(err, errlen, "%s: bad arguments", file);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	line = malloc(len + 1);
	if (!p || !line) {
		free(p);
		free(line);
		if (err && errlen)
			snprintf(err, errlen, "%s: out of memory", file);
		return -ENOMEM;
	}
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	snprintf(cfg->file, sizeof(cfg->file), "%s", file);
	cfg->chunk_size = DEF_CHUNK;
	snprintf(cfg->transport, sizeof(cfg->transport), "fabric");
	snprintf(cfg->provider, sizeof(cfg->provider), "tcp");
	cfg->min_legs = 1;
	cfg->queue_depth = DEF_QUEUE_DEPTH;
	cfg->sync_queue_depth = DEF_SYNC_QUEUE_DEPTH;
	cfg->heartbeat_ms = DEF_HEARTBEAT_MS;
	cfg->failure_timeout_ms = DEF_FAILURE_MS;
	cfg->request_timeout_ms = DEF_REQUEST_MS;
	cfg->poll_us = DEF_POLL_US;
	p->file = file;
	p->cfg = cfg;
	p->err = err;
	p->errlen = errlen;
	p->sec = SEC_NONE;

	while (pos < len && !ret) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (buf + pos)) : len - pos;
		char *s;

		p->line++;
		memcpy(line, buf + pos, n);
		line[n] = '\0';
		pos += n + (nl ? 1 : 0);
		if (n && line[n - 1] == '\r')
			line[--n] = '\0';
		if (strlen(line) != n) {
			ret = fail_at(p, p->line, "NUL byte in the line");
			break;
		}
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)line[i] < ' ' && line[i] != '\t') {
				ret = fail_at(p, p->line, "control character 0x%02x in the line",
					      (unsigned char)line[i]);
				break;
			}
		if (ret)
			break;
		s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		ret = *s == '[' ? section_line(p, s) : key_line(p, s);
	}
	p->last_line = p->line;
	if (!ret)
		ret = check_whole(p);
	free(line);
	free(p);
	return ret;
}

BRMR_EXPORT int brmr_config_load(const char *path, struct brmr_config *cfg, char *err,
				size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, ret;

	if (!path || !*path) {
		if (err && errlen)
			snprintf(err, errlen, "no configuration file named");
		return -EINVAL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto sys_error;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto sys_error;
	}
	if (S_ISDIR(st.st_mode)) {
		ret = -EISDIR;
		goto sys_error;
	}
	buf = malloc(BRMR_CONFIG_FILE_MAX + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto sys_error;
	}
	/* Read to the end (or past the limit): a pipe or /dev/stdin works too. */
	while (len <= BRMR_CONFIG_FILE_MAX) {
		ssize_t n = read(fd, buf + len, BRMR_CONFIG_FILE_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto sys_error;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	fd = -1;
	if (len > BRMR_CONFIG_FILE_MAX) {
		free(buf);
		if (err && errlen)
			snprintf(err, errlen, "%s: larger than %u bytes", path, BRMR_CONFIG_FILE_MAX);
		return -EFBIG;
	}
	ret = brmr_config_parse(path, buf, len, cfg, err, errlen);
	free(buf);
	return ret;

sys_error:
	if (fd >= 0)
		close(fd);
	free(buf);
	if (err && errlen)
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(-ret));
	return ret;
}

BRMR_EXPORT int brmr_config_pool_path(const char *pool, char *out, size_t outlen)
{
	const char *dir = getenv(BRMR_CONFIG_DIR_ENV);
	int n;

	if (!pool || !valid_pool_name(pool) || !out)
		return -EINVAL;
	if (!dir || !*dir)
		dir = BRMR_CONFIG_DIR;
	n = snprintf(out, outlen, "%s/%s.conf", dir, pool);
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

BRMR_EXPORT int brmr_config_load_pool(const char *pool, struct brmr_config *cfg, char *err,
				     size_t errlen)
{
	char path[BRMR_CONFIG_PATH_MAX + 1];
	int ret;

	ret = brmr_config_pool_path(pool, path, sizeof(path));
	if (ret < 0) {
		if (err && errlen && ret == -EINVAL)
			snprintf(err, errlen,
				 "'%s' is not a pool name (1..%u characters of [A-Za-z0-9._-])",
				 pool ? pool : "", RMR_NAME_MAX);
		else if (err && errlen)
			snprintf(err, errlen, "the file of pool '%s' has too long a path", pool);
		return ret;
	}
	ret = brmr_config_load(path, cfg, err, errlen);
	if (ret < 0)
		return ret;
	if (strcmp(cfg->name, pool)) {
		if (err && errlen)
			snprintf(err, errlen, "%s:%u: the file is for pool '%s' but names pool '%s'",
				 path, cfg->line, pool, cfg->name);
		return -EINVAL;
	}
	return 0;
}

BRMR_EXPORT const struct brmr_config_member *brmr_config_member(const struct brmr_config *cfg,
							       unsigned id)
{
	if (!cfg)
		return NULL;
	for (unsigned i = 0; i < cfg->nmembers && i < RMR_MAX_MEMBERS; i++)
		if (cfg->members[i].id == id)
			return &cfg->members[i];
	return NULL;
}
