/*
 * pagewalk.c
 *		The machine's own floor for a lookup spread over many pages: what
 *		one read of a random page of shared memory costs a process that
 *		also enters the kernel once per call, as a backend does to receive
 *		each call and send its answer, against the same over a few pages.
 *		No PostgreSQL in it: the figure says what the hardware and its
 *		virtualization charge for the spread alone.
 *
 * Usage: pagewalk warm|cold PROCS SECONDS ROUNDS PAGES...
 *
 * Maps one shared anonymous region of the largest PAGES pages of 4 kB,
 * as the server maps its shared memory, and touches every page of it.
 * Then, for each round and each page count in turn (the order reversed
 * every round), forks PROCS processes that each, for SECONDS, loop over:
 * one system call (getppid()) and one byte read at a random place of the
 * region's first N pages.  warm: each process first reads every one of
 * its N pages once, off the clock, as a backend that has served long
 * has; cold: it starts at once, as the new backends of a pgbench run do,
 * and maps the pages as it meets them.  Prints per run
 *   run ROUND pages=N ns_per_call=X
 * (wall-clock nanoseconds per iteration, averaged over the processes; with
 * more processes than cores this includes their turns) and at the end,
 * per page count, the median over the rounds and its ratio to the first
 * page count's (calls per second over calls per second):
 *   pages=N median_ns=X ratio=Y
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE_BYTES 4096L
#define MAX_COUNTS 32
#define MAX_ROUNDS 64

static double
now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* one process's loop; returns nanoseconds per iteration */
static double
walk(const volatile char *region, long pages, double seconds, uint64_t seed,
	 int warm)
{
	uint64_t	x = seed * 2654435761u + 88172645463325252ull;
	uint64_t	sum = 0;
	long		n = 0;
	double		t0;
	double		t1;

	if (warm)
		for (long i = 0; i < pages; i++)
			sum += region[i * PAGE_BYTES];
	t0 = now_s();

	do
	{
		for (int k = 0; k < 1000; k++)
		{
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			sum += region[(x % pages) * PAGE_BYTES + (x >> 40) % PAGE_BYTES];
			sum += (uint64_t) getppid();
		}
		n += 1000;
		t1 = now_s();
	} while (t1 - t0 < seconds);
	if (sum == 42)
		fputc(' ', stderr);		/* keeps the reads */
	return (t1 - t0) * 1e9 / n;
}

/* PROCS processes over the first pages pages; their mean ns per call */
static double
run(const char *region, long pages, int procs, double seconds, int warm)
{
	int			fds[2];
	double		total = 0;

	if (pipe(fds) != 0)
	{
		perror("pagewalk: pipe");
		exit(1);
	}
	for (int p = 0; p < procs; p++)
	{
		pid_t		pid = fork();

		if (pid < 0)
		{
			perror("pagewalk: fork");
			exit(1);
		}
		if (pid == 0)
		{
			double		ns = walk(region, pages, seconds, (uint64_t) p + 1, warm);

			if (write(fds[1], &ns, sizeof(ns)) != sizeof(ns))
				_exit(1);
			_exit(0);
		}
	}
	close(fds[1]);
	for (int p = 0; p < procs; p++)
	{
		double		ns;

		if (read(fds[0], &ns, sizeof(ns)) != sizeof(ns))
		{
			fprintf(stderr, "pagewalk: a process failed\n");
			exit(1);
		}
		total += ns;
	}
	close(fds[0]);
	while (wait(NULL) > 0)
		;
	return total / procs;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int			procs;
	double		seconds;
	int			rounds;
	int			ncounts = argc - 5;
	int			warm;
	long		counts[MAX_COUNTS];
	double		ns[MAX_COUNTS][MAX_ROUNDS];
	double		median[MAX_COUNTS];
	long		largest = 0;
	char	   *region;

	if (argc < 6 || ncounts > MAX_COUNTS ||
		(strcmp(argv[1], "warm") != 0 && strcmp(argv[1], "cold") != 0))
	{
		fprintf(stderr, "usage: pagewalk warm|cold PROCS SECONDS ROUNDS PAGES... (at most %d page counts)\n", MAX_COUNTS);
		return 2;
	}
	warm = strcmp(argv[1], "warm") == 0;
	procs = atoi(argv[2]);
	seconds = atof(argv[3]);
	rounds = atoi(argv[4]);
	if (procs < 1 || seconds <= 0 || rounds < 1 || rounds > MAX_ROUNDS)
	{
		fprintf(stderr, "pagewalk: PROCS >= 1, SECONDS > 0, 1 <= ROUNDS <= %d\n", MAX_ROUNDS);
		return 2;
	}
	for (int i = 0; i < ncounts; i++)
	{
		counts[i] = atol(argv[5 + i]);
		if (counts[i] < 1)
		{
			fprintf(stderr, "pagewalk: a page count must be at least 1\n");
			return 2;
		}
		if (counts[i] > largest)
			largest = counts[i];
	}

	region = mmap(NULL, largest * PAGE_BYTES, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
	{
		perror("pagewalk: mmap");
		return 1;
	}
	for (long i = 0; i < largest; i++)
		memset(region + i * PAGE_BYTES, (int) (i & 0x7f), PAGE_BYTES);

	for (int r = 0; r < rounds; r++)
	{
		for (int j = 0; j < ncounts; j++)
		{
			int			i = (r % 2) ? ncounts - 1 - j : j;

			ns[i][r] = run(region, counts[i], procs, seconds, warm);
			printf("run %d pages=%ld ns_per_call=%.1f\n", r + 1, counts[i], ns[i][r]);
			fflush(stdout);
		}
	}
	for (int i = 0; i < ncounts; i++)
	{
		qsort(ns[i], rounds, sizeof(double), cmp_double);
		median[i] = ns[i][rounds / 2];
		printf("pages=%ld median_ns=%.1f ratio=%.3f\n", counts[i], median[i],
			   median[0] / median[i]);
	}
	return 0;
}
