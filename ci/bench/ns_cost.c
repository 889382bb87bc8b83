/* What each namespace costs a run, measured without the rest of the
 * sandbox: a child is forked, enters the namespaces named (writing its id
 * maps for a user namespace, forking once more for a PID namespace, whose
 * first child is its init), and executes a no-op program; the parent waits.
 * The variants run interleaved, in an order shuffled each round, and the
 * medians are printed as a markdown table. Also timed: fork and exec of the
 * server binary itself (`--version`), the base cost of a helper re-executed
 * per run.
 *
 *   ns_cost ROUNDS NOOP_PROGRAM SERVER_BINARY
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        _exit(90);
    close(fd);
}

static int wait_for(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    return st;
}

struct variant {
    const char *name;
    int flags; /* -1: exec the server binary instead */
};

static const struct variant VARIANTS[] = {
    {"fork + exec + wait (no namespace)", 0},
    {"+ user namespace (with id maps)", CLONE_NEWUSER},
    {"+ user + IPC", CLONE_NEWUSER | CLONE_NEWIPC},
    {"+ user + PID (one more fork: the init)", CLONE_NEWUSER | CLONE_NEWPID},
    {"+ user + network", CLONE_NEWUSER | CLONE_NEWNET},
    {"+ user + network + IPC + PID", CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID},
    {"fork + exec of the server binary (--version)", -1},
};
#define NVARIANTS (sizeof VARIANTS / sizeof VARIANTS[0])

static void run_once(const struct variant *v, char *noop, char *server) {
    pid_t child = fork();
    if (child < 0)
        exit(91);
    if (child == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        if (v->flags < 0) {
            char *argv[] = {server, "--version", NULL};
            execv(server, argv);
            _exit(92);
        }
        char uid_line[64], gid_line[64];
        snprintf(uid_line, sizeof uid_line, "%d %d 1\n", getuid() ? getuid() : 65534, getuid());
        snprintf(gid_line, sizeof gid_line, "%d %d 1\n", getgid() ? getgid() : 65534, getgid());
        if (v->flags && unshare(v->flags) != 0)
            _exit(93);
        if (v->flags & CLONE_NEWUSER) {
            write_file("/proc/self/setgroups", "deny");
            write_file("/proc/self/uid_map", uid_line);
            write_file("/proc/self/gid_map", gid_line);
        }
        char *argv[] = {noop, "noop", NULL};
        if (v->flags & CLONE_NEWPID) {
            pid_t init = fork();
            if (init == 0) {
                pid_t backend = fork();
                if (backend == 0) {
                    execv(noop, argv);
                    _exit(94);
                }
                _exit(WEXITSTATUS(wait_for(backend)));
            }
            _exit(WEXITSTATUS(wait_for(init)));
        }
        execv(noop, argv);
        _exit(95);
    }
    int st = wait_for(child);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "ns_cost: %s failed (status %d)\n", v->name, st);
        exit(1);
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: ns_cost ROUNDS NOOP_PROGRAM SERVER_BINARY\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    if (rounds < 1)
        return 2;
    double *t = calloc((size_t)rounds * NVARIANTS, sizeof *t);
    if (!t)
        return 1;
    size_t order[NVARIANTS];
    for (size_t k = 0; k < NVARIANTS; k++)
        order[k] = k;
    unsigned long long rng = 0x9e3779b97f4a7c15ULL;
    for (int r = 0; r < rounds; r++) {
        for (size_t k = NVARIANTS - 1; k > 0; k--) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            size_t j = rng % (k + 1), tmp = order[k];
            order[k] = order[j];
            order[j] = tmp;
        }
        for (size_t k = 0; k < NVARIANTS; k++) {
            size_t i = order[k];
            double start = now_us();
            run_once(&VARIANTS[i], argv[2], argv[3]);
            t[i * rounds + r] = now_us() - start;
        }
    }
    printf("| what one run does | median µs | extra over no namespace (µs) |\n| --- | ---: | ---: |\n");
    double first = 0;
    for (size_t i = 0; i < NVARIANTS; i++) {
        qsort(t + i * rounds, rounds, sizeof *t, cmp);
        double med = t[i * rounds + rounds / 2];
        if (i == 0)
            first = med;
        if (i == 0 || VARIANTS[i].flags < 0)
            printf("| %s | %.0f | |\n", VARIANTS[i].name, med);
        else
            printf("| %s | %.0f | %+.0f |\n", VARIANTS[i].name, med, med - first);
    }
    free(t);
    return 0;
}
