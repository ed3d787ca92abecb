//! The registry connection: PostgreSQL's own libpq (linked as postgres_fdw, dblink and
//! pg_cron link it, through the `pq-sys` bindings), driven only through its non-blocking API
//! (`PQconnectStartParams`/`PQconnectPoll`, `PQsendQueryParams`/`PQconsumeInput`) and waits on
//! the process's latch and the socket together (`WaitLatchOrSocket`). So a SIGTERM, a reload and
//! every deadline end a wait at once, whatever the registry or the network does; a registry
//! that stops answering costs a timeout, never a stuck process (DESIGN.md §6). A leaf: the
//! settings check `idgen.registry` with [`parse`], the registry client and the segment
//! allocators connect with [`connect`].
//!
//! What libpq would do without a deadline is kept out: host names that need DNS are refused by
//! [`parse`] (`getaddrinfo` cannot be interrupted; give `hostaddr`), GSSAPI encryption is off
//! unless the connection string asks for it (its negotiation can wait on a KDC), a multi-host
//! string goes on to a host that accepts writes (`target_session_attrs=read-write`), its hosts
//! are tried one at a time for 2 s each (libpq's `connect_timeout` does not apply to
//! `PQconnectPoll`), and every
//! session runs with `statement_timeout` and `lock_timeout` shorter than the client's own
//! deadline, so the registry ends a statement the client stopped waiting for by itself, on the
//! same connection.

use std::ffi::{c_char, c_int, CStr, CString};
use std::time::Instant;

use pgrx::pg_sys;
use pq_sys as pq;

/// Why a connection or a query failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConnError {
    /// libpq could not connect, or lost the connection: its message.
    Failed(String),
    /// The registry raised an error: SQLSTATE, message, detail, hint.
    Remote(Remote),
    /// The deadline passed first.
    TimedOut,
    /// SIGTERM arrived during an interruptible wait.
    Terminated,
}

/// An error the registry server raised.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Remote {
    pub(crate) sqlstate: String,
    pub(crate) message: String,
    pub(crate) detail: Option<String>,
    pub(crate) hint: Option<String>,
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Failed(m) => write!(f, "{m}"),
            ConnError::Remote(r) => write!(f, "{} (SQLSTATE {})", r.message, r.sqlstate),
            ConnError::TimedOut => write!(f, "the registry did not answer in time"),
            ConnError::Terminated => write!(f, "terminated"),
        }
    }
}

/// What ends a wait besides the socket and the deadline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// The registry client (SIGTERM is a flag, `worker::Sigterm::Flag`): a SIGTERM ends it
    /// ([`ConnError::Terminated`]).
    Interruptible,
    /// Only the deadline: the release at shutdown runs after SIGTERM.
    UntilDeadline,
    /// A process with PostgreSQL's own handlers (the segment allocator): every wakeup checks
    /// for interrupts, so a cancel or a termination raises its ERROR or FATAL as anywhere else.
    Interrupts,
}

/// One open connection to the registry; closed on drop.
pub(crate) struct Conn {
    raw: *mut pq::PGconn,
    /// The registry database's idgen schema, quoted (empty until the session is set up).
    schema: String,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: `raw` came from PQconnectStartParams and is finished exactly once, here.
        unsafe { pq::PQfinish(self.raw) };
    }
}

/// Checks a connection string as libpq parses it (`PQconninfoParse`, key=value or URI) without
/// connecting, and that connecting needs no name lookup: every host (as [`connect`] pairs them,
/// [`pair`]) has its own non-empty `hostaddr` element, or is an IP address or a Unix socket
/// directory (an absolute path). `localhost` needs its `hostaddr` too: libpq looks it up with
/// `getaddrinfo` like any name (`/etc/hosts` first, then whatever `nsswitch.conf` says).
/// `Err` says what is wrong; it never repeats a value of the string (a password may be one).
pub(crate) fn parse(conninfo: &str) -> Result<(), String> {
    let text = CString::new(conninfo).map_err(|_| "it contains a NUL byte".to_string())?;
    let mut errmsg: *mut c_char = std::ptr::null_mut();
    let (mut host, mut hostaddr, mut service, mut sslmode) = (None, None, false, None);
    // SAFETY: a NUL-terminated string and a valid out pointer; the options array (terminated by
    // an entry without keyword) and the message are libpq's allocations, freed with its own
    // functions below.
    unsafe {
        let options = pq::PQconninfoParse(text.as_ptr(), &mut errmsg);
        if options.is_null() {
            let message = take_message(errmsg);
            return Err(if message.is_empty() {
                "out of memory".into()
            } else {
                redact(&message)
            });
        }
        let mut o = options;
        while !(*o).keyword.is_null() {
            let value = (!(*o).val.is_null())
                .then(|| CStr::from_ptr((*o).val).to_string_lossy().into_owned());
            match CStr::from_ptr((*o).keyword).to_bytes() {
                b"host" => host = value,
                b"hostaddr" => hostaddr = value,
                b"service" if value.is_some() => service = true,
                // (libpq reports the old requiressl=1 as sslmode=require here.)
                b"sslmode" => sslmode = value,
                _ => {}
            }
            o = o.add(1);
        }
        pq::PQconninfoFree(options);
    }
    // What the string leaves out, libpq takes from the environment of the postmaster (PGHOST,
    // PGHOSTADDR) or from a service file: those count as if written here.
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if service || env("PGSERVICE").is_some() {
        return Err("a service (pg_service.conf) may name hosts that need a name lookup, which a background worker cannot interrupt: write host and hostaddr in idgen.registry".into());
    }
    let hostaddr = hostaddr
        .filter(|a| !a.is_empty())
        .or_else(|| env("PGHOSTADDR"))
        .unwrap_or_default();
    let host = host
        .filter(|h| !h.is_empty())
        .or_else(|| env("PGHOST"))
        .unwrap_or_default();
    let untrimmed = |list: &str| list.split(',').any(|x| x.trim() != x);
    if untrimmed(&host) || untrimmed(&hostaddr) {
        return Err("a host or hostaddr with spaces around it is passed to libpq as it is, where it needs a name lookup, which a background worker cannot interrupt: write the addresses without spaces".into());
    }
    for Host { host, hostaddr, .. } in pair(&host, &hostaddr, "") {
        if !hostaddr.is_empty()
            || host.is_empty()
            || host.starts_with('/')
            || host.starts_with('@')
            || host.parse::<std::net::IpAddr>().is_ok()
        {
            continue;
        }
        return Err(if host == "localhost" {
            "host \"localhost\" is looked up with getaddrinfo like any name, which a background worker cannot interrupt: write 127.0.0.1 or ::1, or give its address with hostaddr=...".into()
        } else {
            format!(
                "host \"{host}\" needs a name lookup, which a background worker cannot interrupt: give its address with hostaddr=... (an address for every host of the list)"
            )
        });
    }
    // Holder secrets and grants cross the network: in clear only to this machine.
    let sslmode = sslmode
        .filter(|m| !m.is_empty())
        .or_else(|| env("PGSSLMODE"))
        .unwrap_or_else(|| "prefer".into());
    let encrypted = matches!(sslmode.as_str(), "require" | "verify-ca" | "verify-full");
    let local = |h: &Host| {
        let address = if h.hostaddr.is_empty() {
            &h.host
        } else {
            &h.hostaddr
        };
        address.is_empty()
            || address.starts_with('/')
            || address.starts_with('@')
            || address
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| match ip {
                    std::net::IpAddr::V4(v4) => v4.is_loopback(),
                    // ::ffff:127.0.0.1 is 127.0.0.1.
                    std::net::IpAddr::V6(v6) => v6
                        .to_ipv4_mapped()
                        .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
                })
    };
    if !encrypted && !pair(&host, &hostaddr, "").iter().all(local) {
        return Err(format!(
            "a registry that is not on a loopback address or a Unix socket needs sslmode=require or stronger, not {sslmode}: the nodes' holder secrets and the registry's grants would cross the network in clear (verify-full with sslrootcert also proves the registry's identity)"
        ));
    }
    Ok(())
}

/// libpq's message about a connection string, without the quoted text it repeats (a
/// misplaced password would be that text): `missing "=" after "..."` becomes
/// `missing "=" after "…"`. Quoted single characters and the names of unknown options stay.
fn redact(message: &str) -> String {
    if message.starts_with("invalid connection option") {
        return message.to_owned();
    }
    message
        .split('"')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 && part.chars().count() > 1 {
                "…"
            } else {
                part
            }
        })
        .collect::<Vec<_>>()
        .join("\"")
}

/// Copies and frees a message libpq allocated (NULL gives "").
///
/// # Safety
/// `msg` is NULL or a string libpq allocated for the caller to free with `PQfreemem`.
unsafe fn take_message(msg: *mut c_char) -> String {
    if msg.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract: a NUL-terminated string of libpq's, freed once here.
    unsafe {
        let text = CStr::from_ptr(msg).to_string_lossy().trim_end().to_owned();
        pq::PQfreemem(msg.cast());
        text
    }
}

/// The first statement of every registry session: the registry database's owner decides its
/// `search_path` (`ALTER DATABASE ... SET search_path = evil, pg_catalog`, a schema named after
/// the nodes' role for `"$user"`), and a function or operator found there runs as the nodes'
/// role with their holder secrets in hand. Until the path is pinned, even an operator between
/// two texts could be someone else's, so this statement names a function fully qualified and
/// uses no operator at all.
const PIN_SEARCH_PATH: &CStr =
    c"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)";

/// The registry session's limits: a statement ends by itself well before the client's own
/// deadline (10 s a call for the registry client, 4 s for a segment allocator), so a client that
/// gives up never leaves one running; a lock is waited
/// for 2 s at most (the registry's functions also say so themselves).
/// Its commits are synchronous at least to its own disk and standbys (`on` unless the role or the
/// connection string asked for `remote_write` or `remote_apply`, which are kept): a registry
/// commit is a fence or a mark that ids rest on, and `off` or `local` could lose it.
/// Its last column is the schema of the registry database's `idgen` (quoted as an identifier;
/// NULL without the extension): every registry function is called in it, by its full name
/// (`@extschema@` in a query, [`Conn::query`]).
const SESSION_SETTINGS: &CStr = c"SELECT pg_catalog.set_config('statement_timeout', '3s', false), \
    pg_catalog.set_config('lock_timeout', '2s', false), \
    pg_catalog.set_config('idle_in_transaction_session_timeout', '10s', false), \
    pg_catalog.set_config('log_parameter_max_length_on_error', '0', false), \
    CASE WHEN pg_catalog.current_setting('synchronous_commit') \
              OPERATOR(pg_catalog.=) ANY ('{off,local,remote_write}'::pg_catalog.text[]) \
         THEN pg_catalog.set_config('synchronous_commit', 'on', false) END, \
    (SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e \
       JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace \
      WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'::pg_catalog.name)";

/// What stands for the registry's idgen schema in a query of [`Conn::query`].
const EXTSCHEMA: &str = "@extschema@";

/// Whether `name` is what `quote_ident` returns: a plain lower-case identifier, or one in
/// double quotes with every inner quote doubled. The schema is written into queries: an answer
/// of any other shape (a registry that is not PostgreSQL's, a man in the middle) is refused.
fn quoted_identifier(name: &str) -> bool {
    let plain = |n: &str| {
        n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$')
    };
    if let Some(inner) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        !inner.is_empty() && !inner.contains('\0') && !inner.replace("\"\"", "").contains('"')
    } else {
        plain(name)
    }
}

/// How long one host of a multi-host connection string may take before the next is tried.
const PER_HOST: std::time::Duration = std::time::Duration::from_secs(2);

/// Connects to `conninfo` before `deadline`. `application_name` is "idgen registry client"
/// unless the connection string sets one. With several hosts, each is tried in turn for at
/// most 2 s (libpq's own `connect_timeout` does not apply to `PQconnectPoll`, so a host that
/// accepts and never answers would otherwise hold every attempt); the last failure is returned.
pub(crate) fn connect(conninfo: &str, deadline: Instant, wait: Wait) -> Result<Conn, ConnError> {
    static PASSPHRASE_HOOK: std::sync::Once = std::sync::Once::new();
    // SAFETY: sets a process-wide function pointer of libpq's, once, before any connection of
    // this process; the hook is a plain function that outlives every connection.
    PASSPHRASE_HOOK.call_once(|| unsafe { pq::PQsetSSLKeyPassHook_OpenSSL(Some(key_passphrase)) });
    let hosts = host_list(conninfo);
    if hosts.len() <= 1 {
        return connect_one(conninfo, None, deadline, wait);
    }
    let mut last = ConnError::TimedOut;
    for host in &hosts {
        let until = deadline.min(Instant::now() + PER_HOST);
        match connect_one(conninfo, Some(host), until, wait) {
            Ok(conn) => return Ok(conn),
            Err(ConnError::Terminated) => return Err(ConnError::Terminated),
            Err(e) => last = e,
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    Err(last)
}

/// One host of a multi-host string: its `host`, `hostaddr` and `port` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Host {
    host: String,
    hostaddr: String,
    port: String,
}

/// The hosts of `conninfo` with their addresses and ports (one port or hostaddr for all if one
/// is given); empty if it cannot be parsed (the connection then reports why).
fn host_list(conninfo: &str) -> Vec<Host> {
    let Ok(text) = CString::new(conninfo) else {
        return Vec::new();
    };
    let mut errmsg: *mut c_char = std::ptr::null_mut();
    let (mut host, mut hostaddr, mut port) = (String::new(), String::new(), String::new());
    // SAFETY: as in `parse`: a NUL-terminated string, libpq's options array walked up to its
    // terminating entry and freed with libpq's own functions.
    unsafe {
        let options = pq::PQconninfoParse(text.as_ptr(), &mut errmsg);
        if options.is_null() {
            take_message(errmsg);
            return Vec::new();
        }
        let mut o = options;
        while !(*o).keyword.is_null() {
            if !(*o).val.is_null() {
                let value = CStr::from_ptr((*o).val).to_string_lossy().into_owned();
                match CStr::from_ptr((*o).keyword).to_bytes() {
                    b"host" => host = value,
                    b"hostaddr" => hostaddr = value,
                    b"port" => port = value,
                    _ => {}
                }
            }
            o = o.add(1);
        }
        pq::PQconninfoFree(options);
    }
    pair(&host, &hostaddr, &port)
}

/// The hosts of the comma-separated lists `host`, `hostaddr` and `port`, element by element; a
/// list of one element serves every host. What [`connect`] connects to, one at a time, and
/// what [`parse`] checks: an empty element of a longer `hostaddr` list leaves its host to a
/// name lookup.
fn pair(host: &str, hostaddr: &str, port: &str) -> Vec<Host> {
    let split = |v: &str| -> Vec<String> { v.split(',').map(|x| x.trim().to_owned()).collect() };
    let (hosts, addrs, ports) = (split(host), split(hostaddr), split(port));
    let n = hosts.len().max(addrs.len());
    let pick = |list: &[String], i: usize| {
        if list.len() == 1 {
            list[0].clone()
        } else {
            list.get(i).cloned().unwrap_or_default()
        }
    };
    (0..n)
        .map(|i| Host {
            host: pick(&hosts, i),
            hostaddr: pick(&addrs, i),
            port: pick(&ports, i),
        })
        .collect()
}

/// Whether the libpq this process runs with knows `require_auth` (16 and later).
fn refuses_gss_auth() -> bool {
    // SAFETY: PQlibVersion only returns a constant of the loaded library.
    unsafe { pq::PQlibVersion() >= 160000 }
}

/// libpq's hook for the passphrase of an encrypted `sslkey`: the connection's `sslpassword`,
/// and never a prompt. libpq's own hook asks on the terminal when there is none, which a
/// background worker would wait on forever, outside its latch; without `sslpassword` the key
/// is not loaded and the connection fails, naming it.
///
/// # Safety
/// Called by libpq with a buffer of `size` bytes and the connection being started.
unsafe extern "C" fn key_passphrase(buf: *mut c_char, size: c_int, conn: *mut pq::PGconn) -> c_int {
    if buf.is_null() || size <= 0 || conn.is_null() {
        return 0;
    }
    let mut written = 0;
    // SAFETY: the connection's options array (terminated by an entry without keyword), freed
    // with libpq's function; at most size - 1 bytes and a NUL are written into libpq's buffer.
    unsafe {
        let options = pq::PQconninfo(conn);
        if options.is_null() {
            return 0;
        }
        let mut o = options;
        while !(*o).keyword.is_null() {
            if CStr::from_ptr((*o).keyword).to_bytes() == b"sslpassword" && !(*o).val.is_null() {
                let password = CStr::from_ptr((*o).val).to_bytes();
                let n = password.len().min(size as usize - 1);
                std::ptr::copy_nonoverlapping(password.as_ptr().cast::<c_char>(), buf, n);
                written = n;
            }
            o = o.add(1);
        }
        *buf.add(written) = 0;
        pq::PQconninfoFree(options);
    }
    written as c_int
}

/// The options `conninfo` sets, as keyword and value, without `host`, `hostaddr` and `port`.
fn options_without_hosts(conninfo: &CStr) -> Result<Vec<(CString, CString)>, ConnError> {
    let mut errmsg: *mut c_char = std::ptr::null_mut();
    let mut out = Vec::new();
    // SAFETY: as in `parse`: a NUL-terminated string, libpq's options array walked up to its
    // terminating entry, copied, and freed with libpq's own functions.
    unsafe {
        let options = pq::PQconninfoParse(conninfo.as_ptr(), &mut errmsg);
        if options.is_null() {
            take_message(errmsg);
            return Err(ConnError::Failed(
                "the connection string cannot be parsed".into(),
            ));
        }
        let mut o = options;
        while !(*o).keyword.is_null() {
            let keyword = CStr::from_ptr((*o).keyword);
            if !(*o).val.is_null() && !matches!(keyword.to_bytes(), b"host" | b"hostaddr" | b"port")
            {
                out.push((keyword.to_owned(), CStr::from_ptr((*o).val).to_owned()));
            }
            o = o.add(1);
        }
        pq::PQconninfoFree(options);
    }
    Ok(out)
}

/// Connects to `conninfo` (to `only` of its hosts, if given) before `deadline`.
fn connect_one(
    conninfo: &str,
    only: Option<&Host>,
    deadline: Instant,
    wait: Wait,
) -> Result<Conn, ConnError> {
    let conninfo =
        CString::new(conninfo).map_err(|_| ConnError::Failed("NUL byte in conninfo".into()))?;
    let nul =
        |t: &str| CString::new(t).map_err(|_| ConnError::Failed("NUL byte in conninfo".into()));
    let chosen = match only {
        Some(h) => Some((nul(&h.host)?, nul(&h.hostaddr)?, nul(&h.port)?)),
        None => None,
    };
    let mut keywords = vec![
        c"application_name".as_ptr(),
        c"target_session_attrs".as_ptr(),
        c"gssencmode".as_ptr(),
        c"connect_timeout".as_ptr(),
    ];
    let mut values = vec![
        c"idgen registry client".as_ptr(),
        c"read-write".as_ptr(),
        c"disable".as_ptr(),
        c"2".as_ptr(),
    ];
    // GSSAPI authentication (pg_hba's `gss`) asks a KDC, through name lookups that cannot be
    // interrupted, like GSSAPI encryption: refused unless the string asks for it. libpq knows
    // `require_auth` from 16 on; an older one would refuse the option, and there the limit is
    // documented (README "Addresses, not names").
    if refuses_gss_auth() {
        keywords.push(c"require_auth".as_ptr());
        values.push(c"!gss".as_ptr());
    }
    // One host of a list: the string's other options one by one, without its host, hostaddr
    // and port lists, then the chosen host's own (an empty one left out: libpq ignores an
    // empty value, which would leave the whole list in force).
    let options = match &chosen {
        Some(_) => options_without_hosts(&conninfo)?,
        None => Vec::new(),
    };
    let expand_dbname = if let Some((host, hostaddr, port)) = &chosen {
        for (k, v) in &options {
            keywords.push(k.as_ptr());
            values.push(v.as_ptr());
        }
        for (k, v) in [(c"host", host), (c"hostaddr", hostaddr), (c"port", port)] {
            if !v.as_bytes().is_empty() {
                keywords.push(k.as_ptr());
                values.push(v.as_ptr());
            }
        }
        0
    } else {
        keywords.push(c"dbname".as_ptr());
        values.push(conninfo.as_ptr());
        1
    };
    keywords.push(std::ptr::null());
    values.push(std::ptr::null());
    // SAFETY: NULL-terminated arrays of NUL-terminated strings that outlive the call; with
    // expand_dbname = 1 the dbname value is read as a whole connection string, whose settings
    // override the defaults before it; a later keyword overrides an earlier one.
    let raw =
        unsafe { pq::PQconnectStartParams(keywords.as_ptr(), values.as_ptr(), expand_dbname) };
    if raw.is_null() {
        return Err(ConnError::Failed("out of memory".into()));
    }
    let conn = Conn {
        raw,
        schema: String::new(),
    };
    if conn.status_bad() {
        return Err(ConnError::Failed(conn.error_message()));
    }
    loop {
        // SAFETY: a connection being started, polled as libpq's documentation prescribes.
        let poll = unsafe { pq::PQconnectPoll(conn.raw) };
        match poll {
            pq::PostgresPollingStatusType::PGRES_POLLING_OK => break,
            pq::PostgresPollingStatusType::PGRES_POLLING_FAILED => {
                return Err(ConnError::Failed(conn.error_message()))
            }
            pq::PostgresPollingStatusType::PGRES_POLLING_WRITING => {
                conn.wait_socket(true, deadline, wait)?
            }
            _ => conn.wait_socket(false, deadline, wait)?,
        }
    }
    // SAFETY: an open connection.
    if unsafe { pq::PQsetnonblocking(conn.raw, 1) } != 0 {
        return Err(ConnError::Failed(conn.error_message()));
    }
    let mut conn = conn;
    conn.query(PIN_SEARCH_PATH, &[], deadline, wait)?;
    let settings = conn.query(SESSION_SETTINGS, &[], deadline, wait)?;
    match settings
        .first()
        .and_then(|row| row.last().cloned().flatten())
    {
        Some(schema) if quoted_identifier(&schema) => conn.schema = schema,
        Some(_) => {
            return Err(ConnError::Failed(
                "the registry named idgen's schema with something that is not an identifier".into(),
            ))
        }
        None => {
            return Err(ConnError::Remote(Remote {
                sqlstate: "42883".into(),
                message: "extension \"idgen\" is not installed in the registry database".into(),
                detail: Some("No registry function was called.".into()),
                hint: None,
            }))
        }
    }
    Ok(conn)
}

impl Conn {
    fn status_bad(&self) -> bool {
        // SAFETY: a connection object of libpq's.
        unsafe { pq::PQstatus(self.raw) == pq::ConnStatusType::CONNECTION_BAD }
    }

    fn error_message(&self) -> String {
        // SAFETY: PQerrorMessage returns a string owned by the connection, valid until the next
        // call on it; copied at once.
        unsafe { CStr::from_ptr(pq::PQerrorMessage(self.raw)) }
            .to_string_lossy()
            .trim_end()
            .to_owned()
    }

    /// `host:port` of the server this connection reached (of a multi-host list, the one).
    pub(crate) fn server(&self) -> String {
        // SAFETY: PQhost and PQport return strings owned by the open connection (or NULL).
        let read = |p: *mut c_char| {
            if p.is_null() {
                String::new()
            } else {
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        // SAFETY: see `read`.
        let (host, port) = unsafe { (read(pq::PQhost(self.raw)), read(pq::PQport(self.raw))) };
        format!("{host}:{port}")
    }

    /// Sleeps on the latch and the socket (readable, or writable if `writable`) until one of
    /// them fires or `deadline` passes. A set latch is reset; in an interruptible wait a
    /// SIGTERM ends it. Exits the process if the postmaster dies.
    fn wait_socket(&self, writable: bool, deadline: Instant, wait: Wait) -> Result<(), ConnError> {
        if wait == Wait::Interruptible && crate::worker::terminating() {
            return Err(ConnError::Terminated);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ConnError::TimedOut);
        }
        let socket_event = if writable {
            pg_sys::WL_SOCKET_WRITEABLE
        } else {
            pg_sys::WL_SOCKET_READABLE
        };
        let events =
            pg_sys::WL_LATCH_SET | socket_event | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
        // SAFETY: PQsocket of an open or connecting connection is its descriptor; MyLatch is
        // this process's latch; the timeout is positive and bounded.
        let fired = unsafe {
            let socket = pq::PQsocket(self.raw);
            if socket < 0 {
                return Err(ConnError::Failed(self.error_message()));
            }
            let fired = pg_sys::WaitLatchOrSocket(
                crate::backend::latch(),
                events as i32,
                socket,
                left.as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long,
                pg_sys::PG_WAIT_EXTENSION,
            );
            if fired & pg_sys::WL_LATCH_SET as i32 != 0 {
                pg_sys::ResetLatch(crate::backend::latch());
            }
            fired
        };
        if wait == Wait::Interrupts {
            pgrx::check_for_interrupts!();
        }
        if fired & pg_sys::WL_TIMEOUT as i32 != 0 && fired & socket_event as i32 == 0 {
            return Err(ConnError::TimedOut);
        }
        Ok(())
    }

    /// Runs `sql` with text parameters (`None` is NULL) and returns the rows of its last
    /// result as text, before `deadline`. `@extschema@` in `sql` is the registry database's
    /// idgen schema, read at connect: a registry function is called as
    /// `@extschema@.idgen_registry_...($1::pg_catalog.text, ...)`, every parameter cast to its
    /// exact type, so that no function or operator of another schema can match it. An error the
    /// registry raises is [`ConnError::Remote`]; after a timeout or a lost connection the caller
    /// drops this one.
    pub(crate) fn query(
        &mut self,
        sql: &CStr,
        params: &[Option<String>],
        deadline: Instant,
        wait: Wait,
    ) -> Result<Vec<Vec<Option<String>>>, ConnError> {
        let text = sql.to_string_lossy();
        let qualified;
        let sql = if text.contains(EXTSCHEMA) {
            if self.schema.is_empty() {
                return Err(ConnError::Failed(
                    "the registry's idgen schema is not known".into(),
                ));
            }
            qualified = CString::new(text.replace(EXTSCHEMA, &self.schema))
                .map_err(|_| ConnError::Failed("NUL byte in a query".into()))?;
            qualified.as_c_str()
        } else {
            sql
        };
        let owned: Vec<Option<CString>> = params
            .iter()
            .map(|p| {
                p.as_deref()
                    .map(|t| CString::new(t).expect("parameters have no NUL"))
            })
            .collect();
        let values: Vec<*const c_char> = owned
            .iter()
            .map(|p| p.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()))
            .collect();
        // SAFETY: an open connection; `values` holds `params.len()` NUL-terminated strings or
        // NULLs that outlive the call; NULL types, lengths and formats mean text parameters;
        // result format 0 is text.
        let sent = unsafe {
            pq::PQsendQueryParams(
                self.raw,
                sql.as_ptr(),
                values.len() as i32,
                std::ptr::null(),
                values.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
            )
        };
        if sent == 0 {
            return Err(ConnError::Failed(self.error_message()));
        }
        // Flush what the non-blocking connection could not send at once.
        loop {
            // SAFETY: an open connection.
            match unsafe { pq::PQflush(self.raw) } {
                0 => break,
                1 => self.wait_socket(true, deadline, wait)?,
                _ => return Err(ConnError::Failed(self.error_message())),
            }
        }
        let mut rows = Vec::new();
        let mut remote = None;
        loop {
            // SAFETY: an open connection with a query in flight.
            while unsafe { pq::PQisBusy(self.raw) } != 0 {
                self.wait_socket(false, deadline, wait)?;
                // SAFETY: as above.
                if unsafe { pq::PQconsumeInput(self.raw) } == 0 {
                    return Err(ConnError::Failed(self.error_message()));
                }
            }
            // SAFETY: not busy, so PQgetResult returns without blocking.
            let result = unsafe { pq::PQgetResult(self.raw) };
            if result.is_null() {
                break;
            }
            // SAFETY: a result of libpq's, read and then cleared exactly once.
            unsafe {
                match pq::PQresultStatus(result) {
                    pq::ExecStatusType::PGRES_TUPLES_OK | pq::ExecStatusType::PGRES_COMMAND_OK => {
                        rows = read_rows(result);
                    }
                    _ => remote = Some(read_error(result, || self.error_message())),
                }
                pq::PQclear(result);
            }
        }
        match remote {
            Some(r) => Err(ConnError::Remote(r)),
            None => Ok(rows),
        }
    }
}

/// The rows of a result, as text.
///
/// # Safety
/// `result` is a valid result of libpq's with status TUPLES_OK or COMMAND_OK.
unsafe fn read_rows(result: *const pq::PGresult) -> Vec<Vec<Option<String>>> {
    // SAFETY: the caller's contract; every index is within PQntuples x PQnfields, and
    // PQgetvalue's strings are owned by the result and copied at once.
    unsafe {
        let (n, m) = (pq::PQntuples(result), pq::PQnfields(result));
        (0..n)
            .map(|row| {
                (0..m)
                    .map(|col| {
                        (pq::PQgetisnull(result, row, col) == 0).then(|| {
                            CStr::from_ptr(pq::PQgetvalue(result, row, col))
                                .to_string_lossy()
                                .into_owned()
                        })
                    })
                    .collect()
            })
            .collect()
    }
}

/// The error a result carries; `fallback` is the connection's message when it has none.
///
/// # Safety
/// `result` is a valid result of libpq's.
unsafe fn read_error(result: *const pq::PGresult, fallback: impl Fn() -> String) -> Remote {
    let field = |code: u8| {
        // SAFETY: the caller's contract; the field's string is owned by the result (or NULL).
        let p = unsafe { pq::PQresultErrorField(result, code as i32) };
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    Remote {
        sqlstate: field(pq::PG_DIAG_SQLSTATE).unwrap_or_else(|| "08006".into()),
        message: field(pq::PG_DIAG_MESSAGE_PRIMARY).unwrap_or_else(fallback),
        detail: field(pq::PG_DIAG_MESSAGE_DETAIL),
        hint: field(pq::PG_DIAG_MESSAGE_HINT),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, redact};

    #[test]
    fn hosts_that_need_no_name_lookup_are_accepted_and_others_refused() {
        for ok in [
            "host=127.0.0.1 port=5432 dbname=ids",
            "host=10.0.0.11,10.0.0.12 port=5432,5433 sslmode=require",
            "host=::1",
            "host=/var/run/postgresql",
            "host=localhost hostaddr=127.0.0.1",
            "host=registry.example hostaddr=10.0.0.11 sslmode=verify-full",
            "host=a.example,b.example hostaddr=10.0.0.11,10.0.0.12 sslmode=verify-ca",
            // One address serves every host of the list (`connect` pairs them so).
            "host=a.example,b.example hostaddr=10.0.0.11 sslmode=require",
            "host=10.0.0.11,/tmp hostaddr=, sslmode=require",
            "postgresql://10.0.0.11:5432/ids?sslmode=require",
            "dbname=ids",
        ] {
            assert_eq!(parse(ok), Ok(()), "{ok}");
        }
        for refused in [
            "host=registry.example",
            "host=10.0.0.11,registry.example",
            "postgresql://registry.example/ids",
            // Each host against its own address: an empty element leaves its name to a lookup.
            "host=10.0.0.1,registry.example hostaddr=10.0.0.1,",
            "host=registry.example,10.0.0.2 hostaddr=,10.0.0.2",
            "host=a.example,b.example,c.example hostaddr=10.0.0.1,10.0.0.2",
            // localhost goes through getaddrinfo too.
            "host=localhost",
            "host=10.0.0.1,localhost",
            "postgresql://localhost/ids",
            // libpq takes the elements as they are: with a space, an address is a name.
            "host='10.0.0.1 '",
            "host='10.0.0.1, 10.0.0.2'",
            "host=registry.example hostaddr=' 10.0.0.1'",
        ] {
            let e = parse(refused).unwrap_err();
            assert!(e.contains("hostaddr"), "{refused}: {e}");
        }
    }

    #[test]
    fn a_registry_off_this_machine_needs_tls() {
        for ok in [
            "host=127.0.0.1",
            "host=127.0.0.2,::1 sslmode=disable",
            "host=::ffff:127.0.0.1",
            "host=registry.example hostaddr=127.0.0.1",
            "host=/tmp",
            "host=@abstract",
            "dbname=ids",
            "host=10.0.0.1 sslmode=require",
        ] {
            assert_eq!(parse(ok), Ok(()), "{ok}");
        }
        for refused in [
            "host=10.0.0.1",
            "host=10.0.0.1 sslmode=prefer",
            "host=10.0.0.1 sslmode=allow",
            "host=127.0.0.1,10.0.0.1 sslmode=disable",
            "host=localhost hostaddr=192.168.1.5",
            "host=::ffff:10.0.0.1",
            "postgresql://10.0.0.11:5432/ids",
        ] {
            let e = parse(refused).unwrap_err();
            assert!(e.contains("sslmode=require"), "{refused}: {e}");
        }
    }

    #[test]
    fn one_host_of_a_list_gets_every_other_option_of_the_string() {
        let options = super::options_without_hosts(
            c"host=/tmp,10.0.0.2 hostaddr=,10.0.0.2 port=5432,5433 dbname=ids user=node",
        )
        .unwrap();
        let keys: Vec<_> = options
            .iter()
            .map(|(k, v)| format!("{}={}", k.to_str().unwrap(), v.to_str().unwrap()))
            .collect();
        assert_eq!(keys, ["user=node", "dbname=ids"]);
    }

    #[test]
    fn only_what_quote_ident_returns_is_taken_for_the_registry_schema() {
        use super::quoted_identifier;
        for ok in [
            "public",
            "idgen",
            "_x1$",
            "\"My Schema\"",
            "\"a\"\"b\"",
            "\"x;y\"",
        ] {
            assert!(quoted_identifier(ok), "{ok}");
        }
        for refused in [
            "",
            "Public",
            "1x",
            "public.x",
            "a b",
            "public; DROP",
            "\"\"",
            "\"a\"b\"",
            "\"a\" || pg_sleep(1) || \"b\"",
        ] {
            assert!(!quoted_identifier(refused), "{refused}");
        }
    }

    #[test]
    fn a_refused_connection_string_is_never_repeated() {
        let e = parse("host=127.0.0.1 password hunter2").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        assert!(!e.contains("password"), "{e}");
        assert_eq!(
            redact(r#"missing "=" after "hunter2" in connection info string"#),
            r#"missing "=" after "…" in connection info string"#
        );
        // An unknown option's name is kept: it is what the operator has to fix.
        let e = parse("host=127.0.0.1 bogus_option=1 password=hunter2").unwrap_err();
        assert!(e.contains("bogus_option") && !e.contains("hunter2"), "{e}");
    }
}

#[cfg(test)]
mod host_tests {
    use super::{host_list, Host};

    fn h(host: &str, hostaddr: &str, port: &str) -> Host {
        Host {
            host: host.into(),
            hostaddr: hostaddr.into(),
            port: port.into(),
        }
    }

    #[test]
    fn a_multi_host_string_is_split_into_its_hosts() {
        assert_eq!(
            host_list("host=10.0.0.1,10.0.0.2 port=5432,5433 dbname=ids"),
            [h("10.0.0.1", "", "5432"), h("10.0.0.2", "", "5433")]
        );
        // One port for every host; addresses without names.
        assert_eq!(
            host_list("hostaddr=10.0.0.1,10.0.0.2 port=6000"),
            [h("", "10.0.0.1", "6000"), h("", "10.0.0.2", "6000")]
        );
        assert_eq!(host_list("host=127.0.0.1 port=5432").len(), 1);
        assert_eq!(host_list("dbname=ids").len(), 1);
        assert!(host_list("host=").len() <= 1);
    }
}
