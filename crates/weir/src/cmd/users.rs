//! `weir users scram`: set, list and delete SCRAM credentials, like
//! `kafka-configs.sh --entity-type users --alter --add-config
//! 'SCRAM-SHA-512=[iterations=8192,password=…]'` and its `--describe` and
//! `--delete-config`. The password is salted here (PBKDF2 with a random
//! salt); the broker receives only the salted form.

use std::io::BufRead;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use weir_client::admin::{DEFAULT_SCRAM_ITERATIONS, ScramAlteration, ScramMechanism};

use super::common::{Bootstrap, run_async};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  weir users scram set --user alice --mechanism SCRAM-SHA-512 --password secret\n  printf 'secret\\n' | weir users scram set --user alice --mechanism SCRAM-SHA-256 --password-stdin --iterations 8192\n  weir users scram list\n  weir users scram delete --user alice --mechanism SCRAM-SHA-512"
)]
pub struct Args {
    #[command(flatten)]
    bootstrap: Bootstrap,
    #[command(subcommand)]
    command: Kind,
}

#[derive(clap::Subcommand)]
enum Kind {
    /// SCRAM credentials (SASL SCRAM-SHA-256 and SCRAM-SHA-512 logins).
    #[command(subcommand)]
    Scram(Command),
}

#[derive(clap::Subcommand)]
enum Command {
    /// Create or replace a user's credential for one mechanism.
    #[command(
        after_help = "Examples:\n  weir users scram set --user alice --mechanism SCRAM-SHA-512 --password secret\n  weir users scram set --user alice --mechanism SCRAM-SHA-256 --password-stdin < password.txt\n\nThe broker refuses an iteration count outside 4096..16384."
    )]
    Set {
        #[arg(long)]
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, value_parser = parse_mechanism)]
        mechanism: ScramMechanism,
        /// The password (visible to other users in `ps`; see --password-stdin).
        #[arg(
            long,
            conflicts_with = "password_stdin",
            required_unless_present = "password_stdin"
        )]
        password: Option<String>,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
        /// PBKDF2 iterations.
        #[arg(long, default_value_t = DEFAULT_SCRAM_ITERATIONS)]
        iterations: u32,
    },
    /// Users with SCRAM credentials: mechanisms and iteration counts.
    #[command(
        after_help = "Examples:\n  weir users scram list\n  weir users scram list --user alice --user bob"
    )]
    List {
        /// Only these users (repeatable); an unknown one is an error.
        #[arg(long = "user")]
        users: Vec<String>,
    },
    /// Delete a user's credential for one mechanism.
    #[command(
        after_help = "Example:\n  weir users scram delete --user alice --mechanism SCRAM-SHA-512"
    )]
    Delete {
        #[arg(long)]
        user: String,
        #[arg(long, value_parser = parse_mechanism)]
        mechanism: ScramMechanism,
    },
}

fn parse_mechanism(s: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(s)
        .ok_or_else(|| format!("{s} is not a SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512)"))
}

pub fn run(args: Args) -> ExitCode {
    let Kind::Scram(command) = args.command;
    // read before connecting: a prompt-less stdin read must not wait on the
    // network first
    let password = match &command {
        Command::Set {
            password,
            password_stdin,
            ..
        } => match (password, password_stdin) {
            (Some(p), _) => Some(p.clone()),
            (None, true) => match read_password(std::io::stdin().lock()) {
                Ok(p) => Some(p),
                Err(e) => {
                    eprintln!("error: {}", super::common::one_line(&e));
                    return ExitCode::from(1);
                }
            },
            (None, false) => None,
        },
        _ => None,
    };
    run_async(async move {
        let mut client = args.bootstrap.connect().await?;
        match command {
            Command::Set {
                user,
                mechanism,
                iterations,
                ..
            } => {
                let password = password.context("no password given")?;
                let a = ScramAlteration::Upsert {
                    user: user.clone(),
                    mechanism,
                    iterations,
                    password,
                };
                alter(&mut client, a, &user).await
            }
            Command::Delete { user, mechanism } => {
                let a = ScramAlteration::Delete {
                    user: user.clone(),
                    mechanism,
                };
                alter(&mut client, a, &user).await
            }
            Command::List { users } => list(&mut client, users).await,
        }
    })
}

/// The first line of `input`, without its line ending; an empty password
/// is refused.
fn read_password(mut input: impl BufRead) -> Result<String> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    let password = line.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        bail!("the password read from standard input is empty");
    }
    Ok(password.to_string())
}

async fn alter(client: &mut weir_client::Client, a: ScramAlteration, user: &str) -> Result<()> {
    let results = client.alter_user_scram_credentials(&[a]).await?;
    match results.into_iter().find(|(u, _)| u == user) {
        Some((_, Ok(()))) => {
            println!("Completed updating config for user {user}.");
            Ok(())
        }
        Some((_, Err(e))) => Err(e.into()),
        None => bail!("the broker did not answer for user {user}"),
    }
}

/// Kafka's `kafka-configs.sh --describe --entity-type users` line per user.
async fn list(client: &mut weir_client::Client, users: Vec<String>) -> Result<()> {
    let asked = (!users.is_empty()).then_some(users.as_slice());
    let described = client.describe_user_scram_credentials(asked).await?;
    let mut failed = None;
    for (user, r) in described {
        match r {
            Ok(infos) => {
                let shown: Vec<String> = infos
                    .iter()
                    .map(|i| {
                        let name = i.mechanism.map_or("UNKNOWN", ScramMechanism::name);
                        format!("{name}=iterations={}", i.iterations)
                    })
                    .collect();
                println!(
                    "SCRAM credential configs for user-principal '{user}' are {}",
                    shown.join(", ")
                );
            }
            Err(e) => {
                eprintln!("error: {e}");
                failed = Some(user);
            }
        }
    }
    match failed {
        Some(user) => bail!("cannot describe the SCRAM credentials of user {user}"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_from_stdin_is_the_first_line() {
        assert_eq!(read_password(&b"s3cret\r\nrest\n"[..]).unwrap(), "s3cret");
        assert_eq!(read_password(&b"with space "[..]).unwrap(), "with space ");
        assert!(read_password(&b"\n"[..]).is_err());
        assert!(read_password(&b""[..]).is_err());
    }

    #[test]
    fn mechanisms_by_exact_name() {
        assert_eq!(
            parse_mechanism("SCRAM-SHA-512"),
            Ok(ScramMechanism::ScramSha512)
        );
        assert!(parse_mechanism("scram-sha-512").is_err());
        assert!(parse_mechanism("PLAIN").is_err());
    }
}
