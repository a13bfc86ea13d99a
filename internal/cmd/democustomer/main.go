// Command democustomer plays the customer at the demo Brand's sign-in and
// the Provider's consent page, for demos and scripts where nobody opens a
// browser: it follows the link a personal agent shows, signs in with the
// demo account's email and password, and allows (all, or only --allow) or
// denies. It is a browser stand-in; personal agents never do this.
//
//	democustomer --email EMAIL --password PASSWORD [--allow "ID ..."] [--deny] [--code CODE] LINK
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pactledger/pactledger/internal/customer"
)

const usage = `usage: democustomer --email EMAIL --password PASSWORD [--allow "ID ..."] [--deny] [--code CODE] LINK
  LINK     the sign-in link the personal agent shows
  --allow  the scope ids to leave checked on the consent page (default: all asked for)
  --deny   deny the request instead
  --code   the code the agent shows, when LINK does not carry it
  The password can also come from DEMO_PASSWORD.
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "democustomer:", err)
		if errors.As(err, new(usageErr)) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("democustomer", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	email := fs.String("email", "", "")
	password := fs.String("password", os.Getenv("DEMO_PASSWORD"), "")
	allow := fs.String("allow", "", "")
	deny := fs.Bool("deny", false, "")
	code := fs.String("code", "", "")
	if err := fs.Parse(args); err != nil {
		return usageErr{err.Error()}
	}
	if *email == "" || *password == "" || fs.NArg() != 1 {
		return usageErr{"--email, --password and the link are required"}
	}
	d := customer.Decision{Deny: *deny, UserCode: *code}
	if *allow != "" {
		d.Keep = strings.FieldsFunc(*allow, func(r rune) bool { return r == ' ' || r == ',' })
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Fprintf(out, "signing in as %s at %s\n", *email, fs.Arg(0))
	pg, err := customer.New(*email, *password).Answer(ctx, fs.Arg(0), d)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s: %s\n", pg.Title, strings.TrimSpace(strings.TrimPrefix(pg.Text, pg.Title)))
	return err
}
