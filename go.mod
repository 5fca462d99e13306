module opledger

go 1.26
