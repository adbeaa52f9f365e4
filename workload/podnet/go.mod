module podnet

go 1.25
