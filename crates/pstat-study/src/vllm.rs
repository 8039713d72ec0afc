//! `pstat activations import --from vllm`: the per-request files of vLLM's hidden-state
//! extraction ([`pstat_data::vllm`]) grouped into an activation folder's per-layer files
//! (docs/activations.md). The cell's `statements.jsonl` and `export.json` (from
//! `pstat activations export --statements-only`) say which statements, with which token ids,
//! and the provenance the run checks. vLLM names its files by request id, so a request is
//! matched to its statement by its token ids: every statement must have one, and every file must
//! be one of the statements (else it was fed other tokens, and is refused by name).

use pstat_data::activations::{Activations, Precision};
use pstat_data::vllm::VllmRequest;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Writes `<cell>/layer_LL.safetensors` for each of `layers` (the layer ids given to vLLM as
/// `eagle_aux_hidden_state_layer_ids`, in order: pstat's layer L is transformers'
/// `hidden_states[L]`) from the `*.safetensors` files of `files`. Returns the files written.
pub fn import(files: &Path, cell: &Path, layers: &[usize]) -> anyhow::Result<Vec<PathBuf>> {
    let export_path = cell.join("export.json");
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(&export_path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", export_path.display()))?,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", export_path.display()))?;
    let field = |key: &str| -> anyhow::Result<String> {
        export[key]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("{}: no string `{key}`", export_path.display()))
    };
    let hidden = export["hidden"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("{}: no `hidden`", export_path.display()))?
        as usize;
    check_layers(layers, &export, &export_path)?;
    let lines_path = cell.join("statements.jsonl");
    let mut statements: Vec<(String, Vec<u32>)> = Vec::new();
    for (n, line) in std::fs::read_to_string(&lines_path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", lines_path.display()))?
        .lines()
        .enumerate()
    {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("{}:{}: {e}", lines_path.display(), n + 1))?;
        let ids = serde_json::from_value(v["token_ids"].clone())
            .map_err(|e| anyhow::anyhow!("{}:{}: token_ids: {e}", lines_path.display(), n + 1))?;
        let id = v["id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("{}:{}: no string `id`", lines_path.display(), n + 1))?;
        statements.push((id.to_string(), ids));
    }
    // Statements with the same token ids (a repeated statement) share their activations: each
    // of their files fills the next one still empty.
    let mut wanted: HashMap<&[u32], Vec<usize>> = HashMap::new();
    for (i, (_, ids)) in statements.iter().enumerate() {
        wanted.entry(ids.as_slice()).or_default().push(i);
    }

    let list = || -> anyhow::Result<Vec<PathBuf>> {
        Ok(std::fs::read_dir(files)
            .map_err(|e| anyhow::anyhow!("{}: {e}", files.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?)
    };
    // vLLM writes a request's file after answering it, holding an exclusive flock on
    // `<file>.lock` (created before the answer) until the file is complete: wait for each.
    for lock in list()?
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".safetensors.lock"))
    {
        std::fs::File::open(lock)
            .and_then(|f| f.lock_shared())
            .map_err(|e| anyhow::anyhow!("{}: {e}", lock.display()))?;
    }
    let mut paths = list()?;
    paths.retain(|p| p.extension().is_some_and(|x| x == "safetensors"));
    paths.sort();
    let mut found: Vec<Option<(VllmRequest, &Path)>> = vec![None; statements.len()];
    for path in &paths {
        let request = VllmRequest::read(path)
            .map_err(|e| anyhow::anyhow!("{}: refused: {e}", path.display()))?;
        let Some(same) = wanted.get(request.token_ids.as_slice()) else {
            anyhow::bail!(
                "{}: refused: its token ids {:?} are not those pstat feeds for any statement of {} (feed vLLM the token_ids of statements.jsonl)",
                path.display(),
                request.token_ids,
                lines_path.display()
            );
        };
        if request.hidden != hidden || request.layers.len() != layers.len() {
            anyhow::bail!(
                "{}: refused: {} layers of hidden size {}, but {} layers ({layers:?}) of hidden size {hidden} were named",
                path.display(),
                request.layers.len(),
                request.hidden,
                layers.len()
            );
        }
        // A file beyond the statements with these ids (a retried request, a second run into
        // the same folder) could hold other numbers: which to keep is the user's call.
        let Some(i) = same.iter().copied().find(|&i| found[i].is_none()) else {
            let earlier = found[same[0]].as_ref().map(|(_, p)| p.display());
            anyhow::bail!(
                "{}: refused: statement {:?} already has its file {} (same token ids); remove the one that should not count",
                path.display(),
                statements[same[0]].0,
                earlier.expect("a statement with all its files found has one")
            );
        };
        found[i] = Some((request, path));
    }
    if let Some(i) = found.iter().position(Option::is_none) {
        anyhow::bail!(
            "{}: no file has the token ids of statement {:?} ({} of {})",
            files.display(),
            statements[i].0,
            i + 1,
            statements.len()
        );
    }
    let mut written = Vec::new();
    for (k, &layer) in layers.iter().enumerate() {
        let mut acts = Activations::new(hidden);
        for ((id, ids), request) in statements.iter().zip(&found) {
            let (request, _) = request.as_ref().expect("every statement was found");
            acts.push(id, ids, &request.layers[k]);
        }
        for key in ["model_sha256", "input", "data_hash"] {
            acts.metadata.insert(key.into(), field(key)?);
        }
        acts.metadata.insert("layer".into(), layer.to_string());
        acts.metadata
            .insert("extractor".into(), "vllm extract_hidden_states".into());
        let path = cell.join(format!("layer_{layer:02}.safetensors"));
        acts.write(&path, Precision::F16)?;
        written.push(path);
    }
    Ok(written)
}

/// The layers named for vLLM's files: each once, and each one the model has (`n_layers` of
/// export.json: 0 = embeddings ..= n_layers), so no file is written under a layer that is not
/// the one it holds.
fn check_layers(layers: &[usize], export: &Value, export_path: &Path) -> anyhow::Result<()> {
    if let Some(layer) = crate::config::first_duplicate(layers) {
        anyhow::bail!("--layers: layer {layer} is named twice");
    }
    let n_layers = export["n_layers"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("{}: no `n_layers`", export_path.display()))?;
    if let Some(layer) = layers.iter().find(|&&l| l as u64 > n_layers) {
        anyhow::bail!(
            "--layers: layer {layer} does not exist: {} says the model has {n_layers} blocks (valid layers: 0 = embeddings ..= {n_layers})",
            export_path.display()
        );
    }
    Ok(())
}
