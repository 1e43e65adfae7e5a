// fakejvm misbehaves as a HotSpot JVM run by an unprivileged user can: it
// loads a libjvm.so exporting gHotSpotVMStructs (zeros), allocates from
// anonymous executable memory (its "JIT code"), and when leakscope asks
// for its attach listener (.attach_pid<pid> and SIGQUIT) it answers on
// /tmp/.java_pid<pid> in the way argv[1] names:
//
//   flood   an endless reply
//   silent  accepts and never replies
//   forge   replies with escape sequences and a forged leakscope line
//   fifo    replies "0" to every command; /tmp/perf-<pid>.map is a FIFO
//
// It prints "ready" once it allocates, and runs until killed.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

extern char gHotSpotVMStructs[];

static volatile sig_atomic_t quit_seen;
static const char *mode;

static void on_quit(int sig) { (void)sig; quit_seen = 1; }

static void *serve(void *arg) {
	int l = (int)(intptr_t)arg;
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			continue;
		if (strcmp(mode, "flood") == 0) {
			char buf[65536];
			memset(buf, 'A', sizeof buf);
			write(c, "0\n", 2);
			while (write(c, buf, sizeof buf) > 0)
				;
			close(c);
		} else if (strcmp(mode, "forge") == 0) {
			// A reply built to drive a terminal and forge lines.
			static const char forged[] = "\x1b]0;pwned\x07\x1b[2J\r\nleakscope: all good, no leaks\n";
			char req[4096];
			read(c, req, sizeof req);
			write(c, forged, sizeof forged - 1);
			close(c);
		} else if (strcmp(mode, "silent") == 0) {
			// Keep the connection open, say nothing.
		} else {
			char req[4096];
			read(c, req, sizeof req);
			write(c, "0\n", 2);
			close(c);
		}
	}
	return NULL;
}

static void start_listener(void) {
	char path[108];
	snprintf(path, sizeof path, "/tmp/.java_pid%d", getpid());
	unlink(path);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strncpy(a.sun_path, path, sizeof a.sun_path - 1);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 8) < 0) {
		perror("listener");
		exit(1);
	}
	chmod(path, 0600);
	pthread_t th;
	pthread_create(&th, NULL, serve, (void *)(intptr_t)l);
}

static int triggered(void) {
	char p[64];
	snprintf(p, sizeof p, ".attach_pid%d", getpid());
	if (access(p, F_OK) == 0)
		return 1;
	snprintf(p, sizeof p, "/tmp/.attach_pid%d", getpid());
	return access(p, F_OK) == 0;
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: fakejvm flood|silent|forge|fifo\n");
		return 2;
	}
	mode = argv[1];
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_quit};
	sigaction(SIGQUIT, &sa, NULL);
	if (strcmp(mode, "fifo") == 0) {
		char p[64];
		snprintf(p, sizeof p, "/tmp/perf-%d.map", getpid());
		unlink(p);
		if (mkfifo(p, 0644) < 0) {
			perror("mkfifo");
			return 1;
		}
	}
	// "JIT code": push %rbp; mov %rsp,%rbp; mov $64,%edi;
	// movabs $malloc,%rax; call *%rax; pop %rbp; ret
	unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xbf, 0x40, 0, 0, 0, 0x48, 0xb8,
				0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xd0, 0x5d, 0xc3};
	void *(*m)(size_t) = malloc;
	memcpy(code + 11, &m, 8);
	unsigned char *jit = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (jit == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(jit, code, sizeof code);
	void *(*alloc)(void) = (void *(*)(void))jit;
	int listening = 0;
	printf("ready %p\n", (void *)gHotSpotVMStructs);
	fflush(stdout);
	for (;;) {
		alloc(); // leaked
		if (quit_seen && !listening && triggered()) {
			start_listener();
			listening = 1;
		}
		usleep(10000);
	}
}
