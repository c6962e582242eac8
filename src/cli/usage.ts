// The help text: every command, its options, and where the defaults come from.

export const USAGE = `Usage: beacon <command> [options]

Server
  start                          Start Beacon (settings: BEACON_* environment variables, see the README).
  admin-key [--rotate]           Print the admin key kept in <BEACON_DATA_DIR>/admin.key, or write a new
                                 one (mode 0600); a running Beacon uses it once restarted.
  backup --out <dir>             Copy the LMDB database (a consistent snapshot, safe while Beacon runs)
                                 from BEACON_DATA_DIR (or --data-dir) into <dir>; the copy is mode 0600.
  secrets rotate                 Seal every stored webhook secret with a new key in <BEACON_DATA_DIR>/secrets.key
                                 (Beacon must be stopped; with BEACON_SECRETS_KEY, rotate there instead).

Admin API (talks to a running Beacon)
  accounts create --name <name>
  accounts list
  tokens create --account <id> --name <name> --attributes <a,b|*> --access <read|write|read-write> [--rate <n>]
  tokens list --account <id>
  tokens revoke --account <id> --id <token id>
  users add --account <id> --email <email> --role <owner|editor|viewer> [--name <name>]
                                 A panel user; prints a generated password once.
  export --account <id> [--out <file>]
                                 The account's configuration (event types, campaigns, segments,
                                 webhooks with secrets redacted) as one JSON document.
  export-events --account <id> --from <time> --to <time> [--out <file.ndjson[.gz]>]
                                 The account's retained events of [from, to), oldest first, one JSON
                                 object a line (gzip when --out ends in .gz; no --out: stdout).
  import-events <file.ndjson[.gz]> --account <id> [--deliver]
                                 A bulk import of profiles, visitors, links and historical events
                                 (docs/events.md), streamed; a progress line (rows/s, ETA) until done.
  import --account <id> --file <file>
                                 Check every item of an export against the account (all problems at once,
                                 nothing written), then PUT each into it.

Options of the admin API commands
  --url <url>                    Beacon's address (default: BEACON_URL, else http://<BEACON_HOST>:<BEACON_PORT>,
                                 the address a server started with the same environment listens on;
                                 unset: http://127.0.0.1:8080).
  --admin-key <key>              The admin key (default: BEACON_ADMIN_KEY, else <BEACON_DATA_DIR>/admin.key).

Exit codes: 0 done, 1 refused by the server or failed, 2 wrong command line.
`
