/* slurm_exec.c: runs Slurm's commands (scontrol, squeue) for `isoctl slurm`
 * without a shell: posix_spawnp with the arguments as they are, so that a
 * job's comment or node list can never become shell syntax; stdout and
 * stderr through pipes read with a deadline, the child killed when it
 * passes it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isoctl/slurm.h"

extern char **environ;

void isoctl_proc_clear(struct isoctl_proc *p)
{
	free(p->out);
	memset(p, 0, sizeof(*p));
}

/* Appends to p->out; -ENOSPC past the limit, -ENOMEM. */
static int take_out(struct isoctl_proc *p, size_t *cap, const char *buf, size_t n)
{
	if (p->out_len + n > ISOCTL_SLURM_MAX_OUTPUT)
		return -ENOSPC;
	if (p->out_len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 4096;
		char *q;

		while (c < p->out_len + n + 1)
			c *= 2;
		q = realloc(p->out, c);
		if (!q)
			return -ENOMEM;
		p->out = q;
		*cap = c;
	}
	memcpy(p->out + p->out_len, buf, n);
	p->out_len += n;
	p->out[p->out_len] = '\0';
	return 0;
}

static void take_err(struct isoctl_proc *p, size_t *len, const char *buf, size_t n)
{
	for (size_t i = 0; i < n && *len + 1 < sizeof(p->err); i++) {
		unsigned char ch = (unsigned char)buf[i];

		p->err[(*len)++] = ch == '\n' ? ' ' : (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	p->err[*len] = '\0';
}

static void trim_err(struct isoctl_proc *p)
{
	size_t n = strlen(p->err);

	while (n && p->err[n - 1] == ' ')
		p->err[--n] = '\0';
}

/* Reads both pipes until both end or the deadline passes. */
static int collect(int out_fd, int err_fd, uint64_t deadline, struct isoctl_proc *p)
{
	struct pollfd fds[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
	size_t cap = 0, elen = 0;
	char buf[8192];

	while (fds[0].fd >= 0 || fds[1].fd >= 0) {
		uint64_t now = iso_mono_ns();
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(fds, 2, (int)((deadline - now) / 1000000ull) + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (int i = 0; i < 2; i++) {
			ssize_t got;
			int r = 0;

			if (fds[i].fd < 0 || !fds[i].revents)
				continue;
			got = read(fds[i].fd, buf, sizeof(buf));
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0) {
				fds[i].fd = -1; /* closed by the caller */
				continue;
			}
			if (i == 0)
				r = take_out(p, &cap, buf, (size_t)got);
			else
				take_err(p, &elen, buf, (size_t)got);
			if (r < 0)
				return r;
		}
	}
	if (!p->out && take_out(p, &cap, "", 0) < 0)
		return -ENOMEM;
	return 0;
}

int isoctl_proc_run(const char *const *argv, long timeout_ms, struct isoctl_proc *p,
                    struct iso_error *err)
{
	uint64_t deadline = iso_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	posix_spawn_file_actions_t fa;
	int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
	pid_t pid = -1;
	int r, status = 0;

	memset(p, 0, sizeof(*p));
	if (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	r = -posix_spawn_file_actions_init(&fa);
	if (r < 0)
		goto out;
	/* dup2 onto 0-2 clears close-on-exec there; every other descriptor
	 * of isoctl is close-on-exec (curl's sockets, these pipes). */
	r = -posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!r)
		r = -posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
	if (!r)
		r = -posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
	if (!r)
		r = -posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r < 0) {
		pid = -1;
		goto out;
	}
	close(out_pipe[1]);
	close(err_pipe[1]);
	out_pipe[1] = err_pipe[1] = -1;
	r = collect(out_pipe[0], err_pipe[0], deadline, p);
	if (r < 0)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	trim_err(p);
	if (!r)
		p->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
out:
	for (int i = 0; i < 2; i++) {
		if (out_pipe[i] >= 0)
			close(out_pipe[i]);
		if (err_pipe[i] >= 0)
			close(err_pipe[i]);
	}
	if (r == 0)
		return 0;
	if (r == -ETIMEDOUT)
		iso_error_set(err, ISO_E_UNAVAILABLE, NULL, "%s did not finish in %ld s", argv[0],
		              (timeout_ms + 999) / 1000);
	else if (r == -ENOSPC)
		iso_error_set(err, ISO_E_TOO_LARGE, NULL, "%s printed more than %u MiB", argv[0],
		              ISOCTL_SLURM_MAX_OUTPUT >> 20);
	else if (pid < 0)
		iso_error_set(err, ISO_E_UNAVAILABLE, NULL, "cannot run %s: %s", argv[0],
		              strerror(-r));
	else
		iso_error_set(err, ISO_E_INTERNAL, NULL, "reading the output of %s: %s", argv[0],
		              strerror(-r));
	isoctl_proc_clear(p);
	return r;
}
