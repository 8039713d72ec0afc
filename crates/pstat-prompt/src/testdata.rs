//! Small synthetic datasets for unit tests: every domain, every kind, fixed splits.

use pstat_data::{Dataset, Domain, Kind, SplitAssignment, SplitConfig, Statement};

pub fn statement(domain: Domain, kind: Kind, i: usize) -> Statement {
    Statement {
        id: format!("{domain}:{}:{i}", kind.as_str()),
        domain,
        relation: "r".into(),
        text: format!("Statement {i} of kind {} in {domain}.", kind.as_str()),
        subject: format!("s{i}"),
        object: format!("o{i}"),
        negated: false,
        kind,
        provenance: "test".into(),
        source: String::new(),
    }
}

/// Ten statements of each non-noise kind per domain; of each kind, indices 0, 4, 8 are test,
/// 1, 5, 9 calibration and the rest (four) training.
pub fn datasets_and_splits() -> (Vec<Dataset>, Vec<SplitAssignment>) {
    let kinds = Kind::TEXTUAL;
    let mut data = Vec::new();
    let mut splits = Vec::new();
    for domain in Domain::ALL {
        let statements: Vec<Statement> = kinds
            .iter()
            .flat_map(|&k| (0..10).map(move |i| statement(domain, k, i)))
            .collect();
        let ids = |r: usize| -> Vec<String> {
            statements
                .iter()
                .enumerate()
                .filter(|(j, _)| (j % 10) % 4 == r || (r == 2 && (j % 10) % 4 == 3))
                .map(|(_, s)| s.id.clone())
                .collect()
        };
        splits.push(SplitAssignment {
            domain,
            config: SplitConfig::default(),
            data_hash: format!("hash-{domain}"),
            families: Vec::new(),
            train: ids(2),
            calibration: ids(1),
            test: ids(0),
        });
        data.push(Dataset {
            domain,
            statements,
            data_hash: format!("hash-{domain}"),
        });
    }
    (data, splits)
}

/// One token per character (id = char + 10) after a BOS of 1; chat turns as tags.
pub struct CharCodec;

impl crate::PromptCodec for CharCodec {
    fn render_chat(&self, user: &str, prefill: &str) -> Result<String, crate::PromptError> {
        Ok(format!("<u>{user}</u><a>{prefill}"))
    }
    fn render_chat_with_system(
        &self,
        system: &str,
        user: &str,
        prefill: &str,
    ) -> Result<String, crate::PromptError> {
        Ok(format!("<s>{system}</s><u>{user}</u><a>{prefill}"))
    }
    fn encode_prompt_with_bos(&self, rendered: &str) -> Result<Vec<u32>, crate::PromptError> {
        self.encode_prompt(rendered)
    }
    fn encode_prompt(&self, rendered: &str) -> Result<Vec<u32>, crate::PromptError> {
        Ok(std::iter::once(1)
            .chain(rendered.chars().map(|c| c as u32 + 10))
            .collect())
    }
    fn encode_option(&self, text: &str) -> Result<Vec<u32>, crate::PromptError> {
        self.encode_prompt(text)
    }
    fn piece(&self, id: u32) -> Result<String, crate::PromptError> {
        Ok(char::from_u32(id - 10)
            .map(String::from)
            .unwrap_or_default())
    }
}

/// Answers a, except for statement 4 under a context of Fictional statements, which it
/// answers c. Decodes the prompts it is given, checking the shared prefix on the way.
pub struct FakeScorer {
    pub calls: usize,
}

impl crate::OptionScorer for FakeScorer {
    fn score(
        &mut self,
        prompts: &crate::EncodedPrompts,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<crate::OptionProbs>, crate::PromptError> {
        self.calls += 1;
        let prefix = prompts.prefix();
        let mut out = Vec::new();
        for (text, tokens) in prompts.texts.iter().zip(&prompts.tokens) {
            assert_eq!(&tokens[..prompts.shared], prefix);
            let (context, rest) = text.split_once(crate::template::QUESTION).unwrap();
            let statement = rest.lines().nth(1).unwrap();
            let p = if context.contains("kind fictional") && statement.starts_with("Statement 4 ") {
                [0.1, 0.2, 0.6]
            } else {
                [0.7, 0.1, 0.1]
            };
            out.push(crate::OptionProbs::from_probs(p));
            progress(1);
        }
        Ok(out)
    }

    fn identity(&self) -> String {
        "fake".into()
    }
}
