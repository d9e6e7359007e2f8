//! The access token: required on every request, generated per start or read from a file.

use std::path::Path;

/// The secret a client shows on every request (`?token=`, the cookie it sets, or
/// `Authorization: Bearer`).
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Token(***)")
    }
}

/// Why a token could not be made or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The operating system's random source failed.
    #[error("could not read random bytes for the access token: {0}")]
    Random(String),
    /// The token file could not be read.
    #[error("cannot read the token file {path}: {error}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The token file holds no usable token.
    #[error(
        "the token file {path} must hold one token of 16 to 256 characters from A-Z a-z 0-9 - _ . ~ (it holds {what})"
    )]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        what: String,
    },
}

impl Token {
    /// A fresh token: 32 random bytes from the operating system (`getrandom`), in hex.
    pub fn generate() -> Result<Token, TokenError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| TokenError::Random(error.to_string()))?;
        Ok(Token(
            bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        ))
    }

    /// The token in `path` (its first line, trimmed).
    pub fn from_file(path: &Path) -> Result<Token, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|error| TokenError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        let token = text.lines().next().unwrap_or("").trim();
        let invalid = |what: String| TokenError::Invalid {
            path: path.to_path_buf(),
            what,
        };
        if !(16..=256).contains(&token.len()) {
            return Err(invalid(format!("{} characters", token.len())));
        }
        if let Some(bad) = token
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-_.~".contains(*c)))
        {
            return Err(invalid(format!("the character {bad:?}")));
        }
        Ok(Token(token.to_owned()))
    }

    /// The token's text (for the URL printed at start).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is this token, in time independent of where they differ.
    pub fn matches(&self, offered: &str) -> bool {
        let (mine, theirs) = (self.0.as_bytes(), offered.as_bytes());
        let mut difference = u8::from(mine.len() != theirs.len());
        for (index, byte) in mine.iter().enumerate() {
            difference |= byte ^ theirs.get(index).copied().unwrap_or(!byte);
        }
        difference == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_itself_only() {
        let token = Token::generate().unwrap();
        assert_eq!(token.as_str().len(), 64);
        assert!(token.matches(token.as_str()));
        assert!(!token.matches(""));
        assert!(!token.matches(&token.as_str()[..63]));
        assert!(!token.matches(&format!("{}0", token.as_str())));
        assert_ne!(Token::generate().unwrap().as_str(), token.as_str());
    }

    #[test]
    fn a_token_file_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "abcdefghijklmnop\n").unwrap();
        assert!(Token::from_file(&path).unwrap().matches("abcdefghijklmnop"));
        std::fs::write(&path, "short\n").unwrap();
        assert!(Token::from_file(&path).is_err());
        std::fs::write(&path, "abcdefghijklmnop<script>\n").unwrap();
        assert!(Token::from_file(&path).is_err());
    }
}
