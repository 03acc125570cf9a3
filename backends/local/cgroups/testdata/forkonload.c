/* A library whose constructor forks as soon as the loader maps it, before
 * any code of the program it is preloaded into runs. The child records its
 * cgroups in $FORKONLOAD_OUT and sleeps. Built by
 * TestCgroupPreloadedLibraryForksInside. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void fork_on_load(void) {
	const char *out = getenv("FORKONLOAD_OUT");
	if (out == NULL || getenv("FORKONLOAD_DONE") != NULL) return;
	setenv("FORKONLOAD_DONE", "1", 1);
	if (fork() != 0) return;
	char tmp[4096], line[1024];
	snprintf(tmp, sizeof tmp, "%s.tmp", out);
	FILE *in = fopen("/proc/self/cgroup", "r"), *o = fopen(tmp, "w");
	while (in != NULL && o != NULL && fgets(line, sizeof line, in) != NULL) fputs(line, o);
	if (o != NULL) fclose(o);
	rename(tmp, out);
	execl("/bin/sleep", "sleep", "600", (char *)NULL);
	_exit(1);
}
