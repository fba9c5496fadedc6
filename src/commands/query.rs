//! `query` (read-only ad hoc SQL, or the interactive prompt), `tables` and `serve`.

#[allow(unused_imports)]
use super::context::*;

pub(super) async fn query(ctx: &Context_, args: QueryArgs) -> Result<()> {
    let params = args.params.iter().map(|p| adhoc::parse_param(p)).collect::<Result<Vec<_>, _>>()?;
    require_lake(&ctx.lake)?;
    let stdin_is_terminal = std::io::stdin().is_terminal();
    let sql = match (&args.sql, &args.file) {
        (Some(s), _) => s.clone(),
        (None, Some(f)) if f.as_os_str() == "-" => read_stdin()?,
        (None, Some(f)) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        (None, None) if stdin_is_terminal && std::io::stdout().is_terminal() => {
            let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
            return adhoc::repl::interactive(&session, args.format, params).await;
        }
        (None, None) if !stdin_is_terminal => read_stdin()?,
        (None, None) => return Err(UsageError("give the SQL as an argument, with -f FILE, or on standard input".into()).into()),
    };
    adhoc::check_read_only(&sql)?;
    refuse_output_in_lake(&ctx.lake, args.output.as_deref())?;
    let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
    // Streamed to the output as it comes (bounded by engine.max_result_rows/_bytes); a file
    // appears, whole, only when the query finished.
    match args.output.as_deref() {
        Some(path) => {
            // Dropped on an error, the pending file takes its temp file with it.
            let mut pending = crate::atomic::Pending::create(path).with_context(|| format!("creating {}", path.display()))?;
            let mut out = std::io::BufWriter::new(pending.file());
            adhoc::run_to(&session, &sql, &params, args.format, &mut out).await?;
            out.into_inner().map_err(|e| e.into_error()).with_context(|| format!("writing {}", path.display()))?;
            pending.commit().with_context(|| format!("publishing {}", path.display()))
        }
        None => {
            if args.format.is_binary() && std::io::stdout().is_terminal() {
                bail!("refusing to write {} to a terminal: use -o FILE", args.format.name());
            }
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
            adhoc::run_to(&session, &sql, &params, args.format, &mut out).await?;
            Ok(())
        }
    }
}

pub(super) fn read_stdin() -> Result<String> {
    let mut sql = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut sql).context("reading SQL from standard input")?;
    Ok(sql)
}

pub(super) async fn tables(ctx: &Context_) -> Result<()> {
    let session = ctx.session.build(&ctx.lake, &ctx.config).await?;
    let docs = adhoc::catalog::describe(&session).await?;
    let mut out = std::io::stdout().lock();
    out.write_all(adhoc::catalog::render(&docs).as_bytes())?;
    out.flush()?;
    Ok(())
}

pub(super) async fn serve(ctx: &Context_, args: ServeArgs) -> Result<()> {
    require_lake(&ctx.lake)?;
    let mut options = crate::serve::ServeOptions::from_config(&ctx.config);
    options.listen = args.listen.unwrap_or(options.listen);
    options.users_file = args.users.or(options.users_file);
    options.tls_cert = args.tls_cert.or(options.tls_cert);
    options.tls_key = args.tls_key.or(options.tls_key);
    options.max_connections = args.max_connections.unwrap_or(options.max_connections).max(1);
    options.tls_required |= args.tls_required;
    crate::serve::serve(ctx.lake.clone(), ctx.config.clone(), ctx.session.clone(), options).await
}
