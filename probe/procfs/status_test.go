package procfs

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

const containerStatus = `Name:	java
Umask:	0022
State:	S (sleeping)
Tgid:	81234
Pid:	81234
PPid:	81200
VmHWM:	  119604 kB
Uid:	1000	1001	1002	1003
Gid:	2000	2001	2002	2003
NSpid:	81234	7
SigQ:	0/7823
SigBlk:	0000000000000000
SigIgn:	0000000000000000
SigCgt:	2000000181005ccf
`

func TestParseStatus(t *testing.T) {
	s, err := ParseStatus([]byte(containerStatus))
	if err != nil {
		t.Fatal(err)
	}
	want := Status{UID: [4]int{1000, 1001, 1002, 1003}, GID: [4]int{2000, 2001, 2002, 2003}, NSpid: []int{81234, 7}, SigCgt: 0x2000000181005ccf, VmHWM: 119604}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("ParseStatus = %+v, want %+v", s, want)
	}
	if s.OwnPid() != 7 {
		t.Errorf("OwnPid = %d, want 7", s.OwnPid())
	}
	// 0x...5ccf: bit 2 set, so SIGQUIT (3) is caught; SIGINT (2) is too;
	// SIGTERM (15): bit 14 of 0x5ccf is set; SIGKILL (9): bit 8 is not.
	for sig, want := range map[int]bool{2: true, 3: true, 9: false, 15: true, 0: false, 65: false} {
		if got := s.Catches(sig); got != want {
			t.Errorf("Catches(%d) = %v, want %v", sig, got, want)
		}
	}

	// Kernels before 4.1 have no NSpid: the Pid line stands in.
	old := strings.Replace(containerStatus, "NSpid:	81234	7\n", "", 1)
	if s, err := ParseStatus([]byte(old)); err != nil || !reflect.DeepEqual(s.NSpid, []int{81234}) {
		t.Errorf("without NSpid: %v, %v; want [81234]", s.NSpid, err)
	}

	for name, bad := range map[string]string{
		"no Uid":     strings.Replace(containerStatus, "Uid:", "Xid:", 1),
		"short Gid":  strings.Replace(containerStatus, "2000	2001	2002	2003", "2000", 1),
		"bad SigCgt": strings.Replace(containerStatus, "2000000181005ccf", "zz", 1),
		"bad NSpid":  strings.Replace(containerStatus, "81234	7", "81234	x", 1),
		"no SigCgt":  strings.Replace(containerStatus, "SigCgt:", "SigXxx:", 1),
		"bad VmHWM":  strings.Replace(containerStatus, "119604 kB", "119604 pages", 1),
	} {
		if _, err := ParseStatus([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzParseStatus checks that ParseStatus never panics and that what it
// accepts is well formed: ids in range, an own pid whenever NSpid is set.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(containerStatus))
	f.Add([]byte(strings.Replace(containerStatus, "NSpid:	81234	7\n", "", 1)))
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseStatus(data)
		if err != nil {
			return
		}
		for _, id := range append(s.UID[:], s.GID[:]...) {
			if id < 0 {
				t.Fatalf("negative id in %+v", s)
			}
		}
		for _, p := range s.NSpid {
			if p <= 0 {
				t.Fatalf("bad NSpid %v", s.NSpid)
			}
		}
		if (len(s.NSpid) > 0) != (s.OwnPid() > 0) {
			t.Fatalf("OwnPid %d with NSpid %v", s.OwnPid(), s.NSpid)
		}
	})
}
