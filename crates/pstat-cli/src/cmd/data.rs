use clap::Subcommand;

#[derive(Subcommand)]
pub enum DataCommand {
    /// Table 1: statements per domain and kind (affirmative / negated).
    Stats,
}

pub fn run(command: DataCommand) -> anyhow::Result<()> {
    match command {
        DataCommand::Stats => Ok(()),
    }
}
