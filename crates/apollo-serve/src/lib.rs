#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod api;
mod app;
mod auth;
mod error;
mod html;
mod live;
mod token;
mod views;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

pub use error::ServeError;
pub use token::{Token, TokenError};

/// What `apollo serve` serves, and where.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// The state directory (read only: never locked, never written).
    pub state_dir: PathBuf,
    /// The address to listen on (127.0.0.1 unless asked otherwise).
    pub bind: IpAddr,
    /// The port; 0 picks a free one.
    pub port: u16,
    /// The token every request must show.
    pub token: Token,
}

impl Options {
    /// Serve `state_dir` on 127.0.0.1, a free port, with `token`.
    pub fn new(state_dir: impl Into<PathBuf>, token: Token) -> Self {
        Options {
            state_dir: state_dir.into(),
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 0,
            token,
        }
    }

    /// Listen on `bind`.
    pub fn bind(mut self, bind: IpAddr) -> Self {
        self.bind = bind;
        self
    }

    /// Listen on `port` (0: a free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }
}

/// A bound server, not yet serving: its address is known (for the URL to print).
#[derive(Debug)]
pub struct Server {
    listener: std::net::TcpListener,
    app: Arc<app::App>,
    token: Token,
}

impl Server {
    /// Opens the state directory (without its lock) and binds the listening socket.
    pub fn bind(options: Options) -> Result<Server, ServeError> {
        let state =
            apollo_runner::read::open_never_locking(&options.state_dir)?.ok_or_else(|| {
                ServeError::NoState {
                    path: options.state_dir.clone(),
                }
            })?;
        let address = SocketAddr::new(options.bind, options.port);
        let listener = std::net::TcpListener::bind(address)
            .map_err(|error| ServeError::Bind { address, error })?;
        listener
            .set_nonblocking(true)
            .map_err(|error| ServeError::Bind { address, error })?;
        let port = listener
            .local_addr()
            .map_err(|error| ServeError::Bind { address, error })?
            .port();
        Ok(Server {
            listener,
            app: Arc::new(app::App::new(state, options.token.clone(), port)),
            token: options.token,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::new(IpAddr::from([127, 0, 0, 1]), 0))
    }

    /// The URL to open, with the token in it.
    pub fn url(&self) -> String {
        let address = self.local_addr();
        let host = match address.ip() {
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_owned(),
            IpAddr::V4(ip) => ip.to_string(),
        };
        format!(
            "http://{host}:{}/?token={}",
            address.port(),
            self.token.as_str()
        )
    }

    /// Serves until SIGINT (Ctrl-C) or SIGTERM, then stops: open event streams end, the
    /// requests in flight finish.
    pub fn run(self) -> Result<(), ServeError> {
        self.run_until(async {
            let terminate = async {
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(mut signal) => {
                        signal.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = terminate => {}
            }
        })
    }

    /// Serves until `shutdown` completes.
    ///
    /// One thread serves every request (tokio's current-thread runtime): the pages are small
    /// reads of the state directory, and a run beside it keeps the machine's cores. Reading a
    /// journal goes to at most two blocking threads, so a large run's page never holds up the
    /// event streams of the others.
    pub fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(2)
            .build()
            .map_err(ServeError::Runtime)?;
        let Server { listener, app, .. } = self;
        runtime.block_on(async move {
            let listener =
                tokio::net::TcpListener::from_std(listener).map_err(ServeError::Runtime)?;
            let router = app::router(app.clone());
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    shutdown.await;
                    app.stop();
                })
                .await
                .map_err(ServeError::Runtime)
        })
    }
}
