package store

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCheckHolder(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process identity is read from /proc: Linux only")
	}
	t.Parallel()
	boot, _ := selfIdentity()
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	start, _, err := readProcStat(sleeper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	live := Holder{PID: sleeper.Process.Pid, Host: hostname(), BootID: boot, ProcStart: start}
	with := func(f func(h *Holder)) Holder { h := live; f(&h); return h }
	for _, tc := range []struct {
		name         string
		h            Holder
		known, alive bool
		says         string
	}{
		{"Alive", live, true, true, "alive, "},
		{"OtherHost", with(func(h *Holder) { h.Host = "elsewhere" }), false, false, "another host"},
		{"Rebooted", with(func(h *Holder) { h.BootID = "another-boot" }), true, false, "rebooted"},
		{"PidReused", with(func(h *Holder) { h.ProcStart = "1" }), true, false, "start time differs"},
		{"NoSuchProcess", with(func(h *Holder) { h.PID = dead.Process.Pid }), true, false, "no such process"},
		{"NoIdentityRecorded", with(func(h *Holder) { h.BootID, h.ProcStart = "", "" }), false, false, "proves nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkHolder(tc.h)
			if got.Known != tc.known || got.Alive != tc.alive || !strings.Contains(got.Why, tc.says) {
				t.Errorf("checkHolder = %+v, want known=%v alive=%v saying %q", got, tc.known, tc.alive, tc.says)
			}
		})
	}
	t.Run("Stopped", func(t *testing.T) {
		if err := sleeper.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer sleeper.Process.Signal(syscall.SIGCONT)
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := checkHolder(live)
			if got.Alive && got.State == "stopped (T)" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("checkHolder of a stopped process = %+v, want alive, stopped (T)", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("Zombie", func(t *testing.T) {
		// A holder killed and not yet reaped by its parent: it holds no
		// lock any more, so a restart must not wait for the reaping.
		z := exec.Command("sleep", "600")
		if err := z.Start(); err != nil {
			t.Fatal(err)
		}
		defer z.Wait()
		zstart, _, err := readProcStat(z.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := z.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		h := Holder{PID: z.Process.Pid, Host: hostname(), BootID: boot, ProcStart: zstart}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, state, _ := readProcStat(z.Process.Pid); state == 'Z' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the killed child never became a zombie")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := checkHolder(h); !got.Known || got.Alive || !strings.Contains(got.Why, "zombie") {
			t.Errorf("checkHolder of a zombie = %+v, want known, gone, saying zombie", got)
		}
	})
	t.Run("Self", func(t *testing.T) {
		self := newHolder()
		if self.PID != os.Getpid() || self.BootID == "" || self.ProcStart == "" {
			t.Fatalf("newHolder() = %+v, want this process with its boot id and start time", self)
		}
		if got := checkHolder(self); got.Alive || !got.Known {
			t.Errorf("checkHolder(self) = %+v: an earlier hold of this process, released, is no live holder", got)
		}
	})
}

func TestReadProcStat_CommandWithParens(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	t.Parallel()
	// A command name with spaces and ')' must not shift the fields.
	dir := t.TempDir()
	odd := dir + "/a) b ("
	if err := os.Symlink("/bin/sleep", odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	start, state, err := readProcStat(cmd.Process.Pid)
	if err != nil || start == "" || state == 0 {
		t.Fatalf("readProcStat = %q, %q, %v; want a start time and a state", start, state, err)
	}
	self, _, _ := readProcStat(os.Getpid())
	if start == self {
		t.Errorf("child start %q equals this process's: fields shifted?", start)
	}
}
