module podgate

go 1.25
