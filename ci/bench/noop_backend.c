/* The smallest backend that follows the catalog contract: `describe
 * --format=json` prints a catalog with one read-only command, every other
 * command prints `{}`. Its own cost is one exec and a write, so whatever a
 * run costs beyond that is the cost of starting it. `--ms=N` sleeps first,
 * so several calls can be in flight at once. `--connects=N` (not in its
 * catalog: the benchmark passes it to sandboxed runs only) first tries N
 * TCP connects to 192.0.2.1:443 (TEST-NET-1), which the sandbox refuses. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char CATALOG[] =
    "{\"catalog\":1,\"program\":{\"name\":\"noop\",\"version\":\"1.0.0\"},"
    "\"format_flag\":\"--format\",\"end_of_options\":true,"
    "\"commands\":[{\"name\":\"noop\",\"summary\":\"Print an empty object.\","
    "\"tags\":[\"read_only\"],\"formats\":[\"json\"],\"positionals\":[],"
    "\"flags\":[{\"name\":\"--ms\",\"type\":\"integer\",\"minimum\":0,\"maximum\":10000,"
    "\"help\":\"Milliseconds to sleep before answering.\"},"
    "{\"name\":\"--format\",\"type\":\"choice\",\"choices\":[\"json\"],\"output_format\":true}]}]}\n";

int main(int argc, char **argv) {
    long ms = 0;
    long connects = 0;
    int describe = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "describe") == 0)
            describe = 1;
        else if (strncmp(argv[i], "--ms=", 5) == 0)
            ms = strtol(argv[i] + 5, NULL, 10);
        else if (strncmp(argv[i], "--connects=", 11) == 0)
            connects = strtol(argv[i] + 11, NULL, 10);
    }
    if (describe) {
        fputs(CATALOG, stdout);
        return 0;
    }
    struct sockaddr_in to = {0};
    to.sin_family = AF_INET;
    to.sin_port = htons(443);
    inet_pton(AF_INET, "192.0.2.1", &to.sin_addr);
    for (long i = 0; i < connects; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0)
            continue;
        if (connect(s, (struct sockaddr *)&to, sizeof to) == 0) {
            /* Connected: the sandbox let the network through. */
            close(s);
            return 3;
        }
        close(s);
    }
    if (ms > 0) {
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    fputs("{}\n", stdout);
    return 0;
}
