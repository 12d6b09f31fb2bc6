/* log.c: OpenSM's log, read for the lines that say it did not do what the
 * partitions file said (include/isostack/smfile.h). OpenSM fails quietly:
 * a file it cannot parse flattens the fabric to the default partition, a
 * table too small drops keys; its log is the only place it says so. The
 * controller's opensm driver scans a local log; the SM host's agent scans
 * the log beside the SM it signals. One scanner for both. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isostack/smfile.h"

/* What OpenSM writes when it did not do what the file said. */
static const char *const incident_marks[] = {
    "retrying with default config", /* the file was refused: fabric flattened */
    "ERR 0507",                     /* switch port enforcement turned off */
    "ERR 0512",                     /* a port's P_Key table is full */
    "PARSE ERROR",                  /* the line that made it refuse the file */
};

void iso_sm_log_mark(struct iso_sm_log *w)
{
	struct stat st;

	w->carry[0] = '\0';
	w->off = w->path[0] && stat(w->path, &st) == 0 ? st.st_size : 0;
}

bool iso_sm_log_scan(struct iso_sm_log *w, char *line, size_t size)
{
	char buf[ISO_SM_LOG_CARRY + 65536];
	_cleanup_close_ int fd = -1;
	struct stat st;
	size_t carry;
	ssize_t n;

	if (!w->path[0])
		return false;
	fd = open(w->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return false;
	if (st.st_size < w->off) /* rotated or truncated */
		w->off = 0;
	for (;;) {
		carry = strlen(w->carry);
		memcpy(buf, w->carry, carry);
		n = pread(fd, buf + carry, sizeof(buf) - carry - 1, w->off);
		if (n <= 0)
			return false;
		w->off += n;
		buf[carry + (size_t)n] = '\0';
		for (size_t i = 0; i < ISO_ARRAY_SIZE(incident_marks); i++) {
			char *hit = strstr(buf, incident_marks[i]);
			if (hit) {
				char *bol = hit, *eol = strchr(hit, '\n');
				while (bol > buf && bol[-1] != '\n')
					bol--;
				snprintf(line, size, "%.*s",
				         (int)(eol ? eol - bol : (long)strlen(bol)), bol);
				w->carry[0] = '\0';
				return true;
			}
		}
		/* keep the unterminated tail: a mark may straddle two reads */
		carry = strlen(buf);
		carry = carry > ISO_SM_LOG_CARRY - 1 ? ISO_SM_LOG_CARRY - 1 : carry;
		memcpy(w->carry, buf + strlen(buf) - carry, carry);
		w->carry[carry] = '\0';
	}
}
