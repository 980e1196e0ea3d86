"""The links to a board: the interface every link honours (base), the serial
link and its raw REPL (serial), TCP (tcp), choosing one for a target (open),
and the snippets that run on the board (onboard/)."""
