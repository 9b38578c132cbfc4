/*
 * relay runs its arguments as a child and copies its stdin to the child's
 * and the child's stdout to its own, each direction on a thread of its own
 * with blocking reads and writes: the least a process between an editor
 * and an agent can cost, the stdio benchmarks' anchor in C.
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static int to_child, from_child;

static void copy(int src, int dst) {
	char buf[65536];
	ssize_t n;
	while ((n = read(src, buf, sizeof buf)) > 0) {
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(dst, buf + off, n - off);
			if (w <= 0)
				return;
			off += w;
		}
	}
}

static void *up(void *arg) {
	(void)arg;
	copy(0, to_child);
	close(to_child);
	return 0;
}

int main(int argc, char **argv) {
	int in[2], out[2];
	if (argc < 2 || pipe(in) < 0 || pipe(out) < 0)
		return 2;
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	to_child = in[1];
	from_child = out[0];
	pthread_t t;
	if (pthread_create(&t, 0, up, 0) != 0)
		return 1;
	copy(from_child, 1);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
