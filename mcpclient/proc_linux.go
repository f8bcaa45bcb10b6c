//go:build linux

package mcpclient

import (
	"os/exec"
	"strings"
	"syscall"
)

// shimScript runs the server ("$0" "$@") under /bin/sh so that its whole
// process group dies with the daemon, even on SIGKILL. The kernel sends
// the shell SIGHUP when the daemon dies (Pdeathsig); the shell then kills
// its process group: the server and everything it started. The kernel's
// parent-death signal alone reaches only the direct child, never a
// grandchild (npx → node, a server's own workers).
//
// The server gets the shell's stdin explicitly (a background job's stdin
// is /dev/null otherwise). A SIGTERM (the go-sdk's graceful stop) is passed
// on to the server, and the shell waits again until it has exited, then
// exits with its status.
//
// The signal alone loses a race: a dying process's files are closed before
// it signals its children (exit_files comes before exit_notify in the
// kernel's do_exit), so the server reads EOF on stdin and may exit, and the
// shell after it, before the SIGHUP is sent; the server's children then
// outlive the daemon. So once the server has exited, the shell asks
// whether the daemon is dying: its leader thread's PF_EXITING flag (0x4,
// field 9 of /proc/PID/stat), set at the start of its exit and so before
// its files close, answers exactly. A daemon that is dying or gone gets
// the group killed; a live one gets the server's exit status, and ends
// the rest of the group itself.
const shimScript = `trap 'kill -KILL 0' HUP
trap 'kill -TERM $p 2>/dev/null' TERM
exec 3<&0
"$0" "$@" <&3 3<&- &
p=$!
exec 3<&-
wait $p
s=$?
while kill -0 $p 2>/dev/null; do wait $p; s=$?; done
if read -r st </proc/$PPID/stat; then
	IFS=' '
	set -- ${st##*) }
	[ $((${7:-0} & 4)) -eq 0 ] || kill -KILL 0
elif [ -r /proc/$$/stat ]; then
	kill -KILL 0
fi
exit $s`

const shell = "/bin/sh"

// dieWithParent returns the command to start in place of cmd so that cmd's
// process and everything it starts end when the daemon ends, however it
// ends. Without a /bin/sh the child itself still gets the parent-death
// signal (its own children then survive a SIGKILL of the daemon).
//
// Pdeathsig fires when the thread that started the child exits; the Go
// runtime does not end its threads (no LockOSThread around the start).
func dieWithParent(cmd *exec.Cmd) *exec.Cmd {
	if cmd.Err != nil { // not found: let Start report it as usual
		return cmd
	}
	if _, err := exec.LookPath(shell); err != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	// A shell sets variables of its own (dash: PWD; bash: SHLVL, _): the
	// server's environment must be exactly the one configured.
	script := shimScript
	var unset []string
	for _, k := range []string{"PWD", "OLDPWD", "SHLVL", "_"} {
		if !hasEnv(cmd.Env, k) {
			unset = append(unset, k)
		}
	}
	if len(unset) > 0 {
		script = "unset " + strings.Join(unset, " ") + "\n" + script
	}
	shim := exec.Command(shell, append([]string{"-c", script, cmd.Path}, cmd.Args[1:]...)...)
	shim.Env, shim.Dir = cmd.Env, cmd.Dir
	shim.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGHUP}
	return shim
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}
