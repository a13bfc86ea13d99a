package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// completion prints a script for bash, zsh and fish, with no key or
// server; the scripts ask the binary itself (__complete) for commands,
// flags and values.
func TestCompletion(t *testing.T) {
	env := map[string]string{"PACTLEDGER_SERVER": "127.0.0.1:1"}
	wants := map[string]string{"bash": "complete -o default -F __start_ledgerctl ledgerctl", "zsh": "#compdef ledgerctl", "fish": "complete -c ledgerctl"}
	for shell, want := range wants {
		code, out, errs := exe(t, env, "completion", shell)
		if code != exitOK || !strings.Contains(out, want) || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: %d %q %s", shell, code, firstLine(out), errs)
		}
		if shell == "bash" {
			script := filepath.Join(t.TempDir(), "ledgerctl.bash")
			if err := os.WriteFile(script, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			if b, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
				t.Errorf("the bash script does not parse: %v %s", err, b)
			}
		}
	}
	if code, _, errs := exe(t, env, "completion", "tcsh"); code != exitUsage {
		t.Errorf("completion tcsh: %d %s", code, errs)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"lookup", "drill", "whoami", "incidents", "completion"}},
		{[]string{"incidents", ""}, []string{"close"}},
		{[]string{"lookup", "--status", ""}, []string{"authorized", "unauthorized", "incident", "duplicate"}},
		{[]string{"lookup", "--output", ""}, []string{"table", "json", "csv"}},
		{[]string{"dispute", ""}, []string{"open", "resolve"}},
		{[]string{"dispute", "open", "abcdef12", "--as", ""}, []string{"customer-authorized", "incident", "other"}},
		{[]string{"lookup", "--pr"}, []string{"--principal"}},
	}
	for _, tc := range tests {
		code, out, errs := exe(t, env, append([]string{"__complete"}, tc.args...)...)
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" && !strings.HasPrefix(l, ":") {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		for _, w := range tc.want {
			if code != exitOK || !slices.Contains(got, w) {
				t.Errorf("completing %q: %d %v %s, want %s among them", tc.args, code, got, errs, w)
			}
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// --output csv prints lists as CSV with full ids; a command that prints
// one record refuses it.
func TestCSVOutput(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	code, out, errs := exe(t, env, "lookup", "--status", "authorized", "--output", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != exitOK || err != nil || len(recs) != 3 {
		t.Fatalf("lookup --output csv: %d %v\n%s%s", code, err, out, errs)
	}
	if want := []string{"row", "issued (UTC)", "status", "principal", "target", "tool", "agent", "dispute", "writer-only targets"}; !slices.Equal(recs[0], want) {
		t.Fatalf("header %q, want %q", recs[0], want)
	}
	var ids []string
	for _, r := range recs[1:] {
		ids = append(ids, r[0])
		if r[2] != "authorized" {
			t.Errorf("row %v", r)
		}
	}
	if !slices.Contains(ids, f.rowID) {
		t.Errorf("csv ids %v lack the full id %s", ids, f.rowID)
	}
	code, out, _ = exe(t, env, "-o", "csv", "whoami")
	if recs, err := csv.NewReader(strings.NewReader(out)).ReadAll(); code != exitOK || err != nil || len(recs) != 2 || recs[1][0] != "support" || recs[1][1] != "support" {
		t.Errorf("whoami as csv: %d %v %q", code, err, out)
	}
	code, out, _ = exe(t, env, "--output", "csv", "drills")
	if recs, err := csv.NewReader(strings.NewReader(out)).ReadAll(); code != exitOK || err != nil || len(recs) != 1 || recs[0][0] != "drill" {
		t.Errorf("no drills as csv: %d %v %q", code, err, out)
	}
	refused := [][]string{
		{"--output", "csv", "show", f.rowID},
		{"--json", "--output", "csv", "lookup", "--status", "authorized"},
		{"--output", "yaml", "lookup", "--status", "authorized"},
	}
	for _, args := range refused {
		if code, out, errs := exe(t, env, args...); code != exitUsage || out != "" || !strings.Contains(errs, "--output") {
			t.Errorf("%v: %d %q %s", args, code, out, errs)
		}
	}
	// --json stays an alias of --output json.
	code, out, _ = exe(t, env, "lookup", "--status", "authorized", "--output", "json")
	var rep struct{ Rows []struct{ ID string } }
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Rows) != 2 {
		t.Errorf("--output json: %d %s", code, out)
	}
}

// --all pages through every result; without it one page and a hint.
func TestAllPages(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	code, out, _ := exe(t, env, "lookup", "--status", "authorized", "--limit", "1")
	if code != exitOK || strings.Count(out, "acct-") != 1 || !strings.Contains(out, "--all lists every one") {
		t.Fatalf("one page: %d %s", code, out)
	}
	code, out, _ = exe(t, env, "lookup", "--status", "authorized", "--limit", "1", "--all")
	if code != exitOK || strings.Count(out, "acct-") != 2 || strings.Contains(out, "more rows") {
		t.Fatalf("--all: %d %s", code, out)
	}
	code, out, _ = exe(t, env, "--json", "lookup", "--status", "authorized", "--limit", "1", "--all")
	var rows struct {
		Rows          []struct{ ID string }
		NextPageToken string
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rows) != nil || len(rows.Rows) != 2 || rows.NextPageToken != "" {
		t.Fatalf("--json --all: %d %s", code, out)
	}
	for range 3 {
		if code, _, errs := exe(t, env, "drill", "A-5531"); code != exitOK {
			t.Fatalf("drill: %d %s", code, errs)
		}
	}
	code, out, _ = exe(t, env, "-o", "csv", "drills", "--limit", "2", "--all")
	if recs, err := csv.NewReader(strings.NewReader(out)).ReadAll(); code != exitOK || err != nil || len(recs) != 4 {
		t.Fatalf("drills --all as csv: %d %v %s", code, err, out)
	}
	code, out, _ = exe(t, env, "drills", "--limit", "2")
	if code != exitOK || strings.Count(out, "drill-") != 2 || !strings.Contains(out, "--all lists every one") {
		t.Fatalf("drills, one page: %d %s", code, out)
	}
}

// Errors name the command, and a refusal the role it needs.
func TestErrorsNameTheCommandAndRole(t *testing.T) {
	f := start(t)
	env := map[string]string{"PACTLEDGER_SERVER": f.addr, "PACTLEDGER_KEY": keys["support"]}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"incidents", "close", "INC-1", "--note", "x"}, exitAuth, "ledgerctl incidents close: not allowed: key support (roles support) may not call CloseIncident (incidents close needs a key with the role admin)"},
		{[]string{"outbox"}, exitAuth, "ledgerctl outbox: not allowed: key support (roles support) may not call GetOutbox (outbox needs a key with the role admin)"},
		{[]string{"sweep"}, exitAuth, "(sweep needs a key with the role admin (a dry run: auditor too))"},
		{[]string{"lookup", "--limit", "many", "--order", "A-1"}, exitUsage, "ledgerctl lookup: invalid argument \"many\" for \"--limit\""},
		{[]string{"lookup", "--frob"}, exitUsage, "ledgerctl lookup: unknown flag: --frob (ledgerctl lookup --help lists its flags)"},
		{[]string{"lookup", "--ordr", "A-5531"}, exitUsage, "ledgerctl lookup: unknown flag: --ordr (did you mean --order? ledgerctl lookup --help lists its flags)"},
		{[]string{"drill", "A-5531", "--principle", "acct-48213"}, exitUsage, "ledgerctl drill: unknown flag: --principle (did you mean --principal? ledgerctl drill --help lists its flags)"},
		{[]string{"--sever", "127.0.0.1:1", "whoami"}, exitUsage, "unknown flag: --sever (did you mean --server? ledgerctl whoami --help lists its flags)"},
		{[]string{"whoami", "extra"}, exitUsage, "ledgerctl whoami: whoami takes no arguments"},
		{[]string{"frobnicate"}, exitUsage, "ledgerctl: unknown command \"frobnicate\""},
	}
	for _, tc := range tests {
		if code, _, errs := exe(t, env, tc.args...); code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q, want %d with %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}
