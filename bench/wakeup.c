/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench/wakeup: what waking another process costs on this machine, the unit
 * in which a replicated write's latency is paid (every hop of a request
 * wakes a process that sleeps in epoll). Two processes pass a byte back and
 * forth over a pair of pipes; one round trip is two wake-ups. Measured
 * pinned to two CPUs, pinned to one, and placed by the scheduler, plus the
 * cost of a system call that does nothing.
 *
 *   bench/wakeup [ROUND_TRIPS]      (build/bench/wakeup, default 20000)
 *
 * Prints "name value unit" lines. On a VM whose idle vCPUs halt, a wake-up
 * across CPUs costs the hypervisor's round trip, which can be ten times the
 * one on a single CPU; bench/run records these lines with every run.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static cpu_set_t all_cpus; /* the affinity we were started with */

/* Run on @p cpu only, or (-1) wherever we were allowed to at start. */
static void pin(int cpu)
{
	cpu_set_t set = all_cpus;

	if (cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
	}
	if (sched_setaffinity(0, sizeof(set), &set) < 0) {
		fprintf(stderr, "wakeup: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
		exit(1);
	}
}

static void xfer(int rfd, int wfd, char *c, int write_first)
{
	if (write_first && write(wfd, c, 1) != 1)
		exit(1);
	if (read(rfd, c, 1) != 1)
		exit(1);
	if (!write_first && write(wfd, c, 1) != 1)
		exit(1);
}

/* Mean round trip in microseconds, parent on @p cpu_a, child on @p cpu_b (-1: anywhere). */
static double ping_pong(long n, int cpu_a, int cpu_b)
{
	int to_child[2], to_parent[2], status;
	char c = 0;
	double t;
	pid_t pid;

	if (pipe(to_child) < 0 || pipe(to_parent) < 0) {
		perror("wakeup: pipe");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("wakeup: fork");
		exit(1);
	}
	if (pid == 0) {
		pin(cpu_b);
		for (long i = 0; i < n + 100; i++)
			xfer(to_child[0], to_parent[1], &c, 0);
		_exit(0);
	}
	pin(cpu_a);
	for (int i = 0; i < 100; i++) /* both sides settled on their CPUs */
		xfer(to_parent[0], to_child[1], &c, 1);
	t = now_s();
	for (long i = 0; i < n; i++)
		xfer(to_parent[0], to_child[1], &c, 1);
	t = now_s() - t;
	pin(-1);
	waitpid(pid, &status, 0);
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
	return t / (double)n * 1e6;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
	int first = -1, second = -1;
	double t;

	if (n <= 0) {
		fprintf(stderr, "usage: wakeup [ROUND_TRIPS > 0]\n");
		return 2;
	}
	if (sched_getaffinity(0, sizeof(all_cpus), &all_cpus) < 0) {
		perror("wakeup: sched_getaffinity");
		return 1;
	}
	for (int cpu = 0; cpu < CPU_SETSIZE && second < 0; cpu++) {
		if (!CPU_ISSET(cpu, &all_cpus))
			continue;
		if (first < 0)
			first = cpu;
		else
			second = cpu;
	}

	t = now_s();
	for (long i = 0; i < n * 10; i++)
		(void)getppid();
	printf("syscall %.0f ns\n", (now_s() - t) / (double)(n * 10) * 1e9);
	printf("round_trip_one_cpu %.1f us\n", ping_pong(n, first, first));
	if (second >= 0)
		printf("round_trip_two_cpus %.1f us\n", ping_pong(n, first, second));
	printf("round_trip_unpinned %.1f us\n", ping_pong(n, -1, -1));
	return 0;
}
