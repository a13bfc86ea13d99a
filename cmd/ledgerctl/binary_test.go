package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/buildinfo"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestMain removes the ledgerctl binary the tests build.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// ctlBinary builds the real ledgerctl once per test run.
func ctlBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ledgerctl-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "ledgerctl")
		// -buildvcs=auto: record the revision as a release build does,
		// whatever GOFLAGS says.
		out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("build ledgerctl: %v", binErr)
	}
	return binPath
}

// exe runs the real ledgerctl binary with only env set (and HOME pointing
// at an empty directory), and returns its exit code, stdout and stderr.
func exe(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(ctlBinary(t), args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// keyFile writes role's key to a file and returns its path.
func keyFile(t *testing.T, role string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), role+".key")
	if err := os.WriteFile(p, []byte(keys[role]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An explicit --key-file beats PACTLEDGER_KEY: the dispute is refused to
// the auditor rather than recorded by support, and whoami says so.
func TestKeyPrecedenceThroughTheBinary(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	cfg := filepath.Join(t.TempDir(), "ledgerctl.yaml")
	if err := os.WriteFile(cfg, []byte("keyFile: "+keyFile(t, "admin")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantName string
		wantFrom string
	}{
		{"env key", env, nil, "support", "PACTLEDGER_KEY"},
		{"--key-file beats env", env, []string{"--key-file", keyFile(t, "auditor")}, "auditor", "--key-file"},
		{"--key beats env", env, []string{"--key", keys["writer"]}, "writer", "--key"},
		{"env key file beats config", map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY_FILE": keyFile(t, "auditor")}, []string{"--config", cfg}, "auditor", "PACTLEDGER_KEY_FILE"},
		{"config file last", map[string]string{"PACTLEDGER_SERVER": f.addr}, []string{"--config", cfg}, "admin", "keyFile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := exe(t, tc.env, append([]string{"whoami"}, tc.args...)...)
			if code != 0 || !strings.Contains(out, "key     "+tc.wantName) || !strings.Contains(out, "roles   "+tc.wantName) || !strings.Contains(out, tc.wantFrom) {
				t.Fatalf("whoami %v: %d\n%s%s", tc.args, code, out, errs)
			}
		})
	}
	code, _, errs := exe(t, env, "--key-file", keyFile(t, "auditor"), "dispute", "open", f.rowID, "--note", "x")
	if code != exitAuth || !strings.Contains(errs, "key auditor") || !strings.Contains(errs, "dispute needs a key with the role support or admin") {
		t.Fatalf("auditor key file under a support env key: %d %s", code, errs)
	}
	code, _, errs = exe(t, env, "show", f.rowID, "--key-file", keyFile(t, "writer"))
	if code != exitAuth || !strings.Contains(errs, "key writer") {
		t.Fatalf("writer key file for a read: %d %s", code, errs)
	}
	if code, _, errs := exe(t, env, "--key", "k", "--key-file", keyFile(t, "writer"), "whoami"); code != exitUsage || !strings.Contains(errs, "pass one") {
		t.Fatalf("both --key and --key-file: %d %s", code, errs)
	}
	// The row's events name the key that acted: none was recorded above.
	code, out, _ := exe(t, env, "--json", "show", f.rowID)
	if code != 0 || strings.Contains(out, `"by"`) {
		t.Fatalf("a refused dispute left an event: %d %s", code, out)
	}
}

func TestHelpNeedsNoKeyOrServer(t *testing.T) {
	env := map[string]string{"PACTLEDGER_SERVER": "127.0.0.1:1"}
	for _, args := range [][]string{{"lookup", "--help"}, {"lookup", "-h"}, {"help", "lookup"}, {"drill", "A-5531", "--help"}, {"--json", "show", "--help"}} {
		code, out, errs := exe(t, env, args...)
		if code != 0 || !strings.Contains(out, "usage: ledgerctl "+strings.TrimPrefix(args[0], "--json")) && !strings.Contains(out, "usage: ledgerctl") || !strings.Contains(out, "Global flags") {
			t.Errorf("%v: %d %s %s", args, code, out, errs)
		}
	}
	if code, out, _ := exe(t, env, "help", "lookup"); code != 0 || !strings.Contains(out, "--since T") || !strings.Contains(out, "Role: support, auditor or admin") {
		t.Errorf("help lookup: %d %s", code, out)
	}
	if code, out, _ := exe(t, env, "help"); code != 0 || !strings.Contains(out, "whoami") {
		t.Errorf("help: %d %s", code, out)
	}
	if code, _, errs := exe(t, env, "help", "frobnicate"); code != exitUsage || !strings.Contains(errs, "unknown command") {
		t.Errorf("help frobnicate: %d %s", code, errs)
	}
	if code, _, errs := exe(t, env, "lookup", "--order", "A-1"); code != exitAuth || !strings.Contains(errs, "ledgerctl lookup: no API key") {
		t.Errorf("lookup without a key: %d %s", code, errs)
	}
}

func TestVersionThroughTheBinary(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := exe(t, nil, args...)
		// A build from a git checkout records the revision (the go command
		// reads a .git directory; a linked worktree's .git file is not read).
		_, gitErr := exec.Command("git", "rev-parse", "HEAD").Output()
		git, statErr := os.Stat("../../.git")
		stamped := gitErr == nil && statErr == nil && git.IsDir()
		if code != 0 || !strings.HasPrefix(out, "ledgerctl ") || (stamped && !strings.Contains(out, "(rev ")) {
			t.Fatalf("%v: %d %q", args, code, out)
		}
	}
}

func TestGlobalFlagsAnywhere(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_KEY": keys["support"]}
	for _, args := range [][]string{
		{"--server", f.addr, "--json", "lookup", "--order", "A-5531"},
		{"lookup", "--order", "A-5531", "--json", "--server", f.addr},
		{"lookup", "--json", "--order=A-5531", "--server=" + f.addr},
	} {
		code, out, errs := exe(t, env, args...)
		var rep struct{ Rows []struct{ ID string } }
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Rows) != 1 || rep.Rows[0].ID != f.rowID {
			t.Fatalf("%v: %d %s %s", args, code, out, errs)
		}
	}
	// A command flag's value is never read as a global flag.
	code, out, errs := exe(t, env, "--server", f.addr, "dispute", "open", f.rowID[:12], "--note", "--json")
	if code != 0 || !strings.Contains(out, "dispute open") {
		t.Fatalf("note reading --json: %d %s %s", code, out, errs)
	}
}

func TestRelativeTimes(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	for _, since := range []string{"1h", "7d", "2w", "90m", "1h30m"} {
		if code, _, errs := exe(t, env, "lookup", "--principal", "acct-48213", "--since", since); code != 0 {
			t.Errorf("--since %s: %d %s", since, code, errs)
		}
	}
	if code, _, errs := exe(t, env, "lookup", "--principal", "acct-48213", "--since", "yesterday"); code != exitUsage || !strings.Contains(errs, "a time ago") {
		t.Errorf("--since yesterday: %d %s", code, errs)
	}
	now := time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"1h":                   now.Add(-time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2w":                   now.Add(-14 * 24 * time.Hour),
		"45s":                  now.Add(-45 * time.Second),
		"1h30m":                now.Add(-90 * time.Minute),
		"2026-10-01":           time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC),
		"2026-10-07T12:00:00Z": now.Add(-time.Hour),
		"now":                  now,
	} {
		got, err := parseTimeAt("since", in, now)
		if err != nil || !got.AsTime().Equal(want) {
			t.Errorf("parseTimeAt(%q) = %v, %v; want %v", in, got.AsTime(), err, want)
		}
	}
}

func TestRowIDPrefixes(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	_, out, _ := exe(t, env, "lookup", "--order", "A-5531")
	if !strings.Contains(out, f.rowID[:12]) {
		t.Fatalf("lookup does not print the 12-character id: %s", out)
	}
	for _, args := range [][]string{
		{"show", f.rowID[:12]},
		{"show", f.rowID[:8]},
		{"show", strings.ToUpper(f.rowID[:10])},
		{"evidence", f.rowID[:12]},
		{"verify", f.rowID[:12]},
		{"drill", "--row", f.rowID[:12]},
		{"dispute", "open", f.rowID[:12], "--note", "customer disputes it"},
		{"proof", f.rowID[:12], "--wait", "20s"},
	} {
		code, out, errs := exe(t, env, args...)
		if code != 0 {
			t.Errorf("%v: %d %s %s", args, code, out, errs)
		}
		if args[0] == "show" && !strings.Contains(out, f.rowID) {
			t.Errorf("%v does not show the full id: %s", args, out)
		}
		// No limits recorded reads as such, not as "count 0" (none allowed).
		if args[0] == "show" && (!strings.Contains(out, "amount none recorded, count none recorded") || strings.Contains(out, "count 0")) {
			t.Errorf("%v: the limits line: %s", args, out)
		}
	}
	if code, _, errs := exe(t, env, "show", f.rowID[:7]); code != exitUsage || !strings.Contains(errs, "at least 8") {
		t.Errorf("7 characters: %d %s", code, errs)
	}
	unknown := "ffffffff"
	if strings.HasPrefix(f.rowID, unknown) {
		unknown = "00000000"
	}
	if code, _, errs := exe(t, env, "show", unknown); code != exitNotFound || !strings.Contains(errs, "no row id starts with "+unknown) {
		t.Errorf("unknown prefix: %d %s", code, errs)
	}
	// A key without the role learns nothing about which prefixes exist.
	if code, _, errs := exe(t, map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["writer"]}, "show", unknown); code != exitAuth {
		t.Errorf("writer probing a prefix: %d %s", code, errs)
	}
}

func TestServerAnsweringHTTP(t *testing.T) {
	f := start(t)
	rest := strings.TrimPrefix(f.http, "http://")
	code, _, errs := exe(t, map[string]string{"PACTLEDGER_KEY": keys["support"]}, "--server", rest, "--timeout", "10s", "show", f.rowID)
	if code != exitUnavailable || !strings.Contains(errs, "answers HTTP, not gRPC") || !strings.Contains(errs, "REST port") {
		t.Fatalf("--server at the REST port: %d %s", code, errs)
	}
}

func TestWhoAmIEveryRole(t *testing.T) {
	f := start(t)
	for role := range keys {
		code, out, errs := exe(t, map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys[role]}, "--json", "whoami")
		var got struct {
			Name  string
			Roles []string
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("whoami %s: %d %s %s", role, code, out, errs)
		}
		if got.Name != role || !slices.Equal(got.Roles, []string{role}) {
			t.Errorf("whoami %s: got %+v, want name %s and roles [%s]", role, got, role, role)
		}
	}
	if code, _, errs := exe(t, map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": "wrong"}, "whoami"); code != exitAuth || !strings.Contains(errs, "rejected the API key from PACTLEDGER_KEY") {
		t.Fatalf("whoami with a wrong key: %d %s", code, errs)
	}
}

// The row's verifier record names the version the server reports.
func TestCheckedByCarriesTheBuild(t *testing.T) {
	f := start(t)
	code, out, _ := f.ctl(t, "support", "--json", "show", f.rowID)
	var rep struct {
		Row struct{ Verifier struct{ CheckedBy string } }
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("show: %d %s", code, out)
	}
	if want := "pactledger " + buildinfo.Read().String(); rep.Row.Verifier.CheckedBy != want {
		t.Fatalf("checkedBy %q, want %q", rep.Row.Verifier.CheckedBy, want)
	}
}
