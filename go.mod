module system1

go 1.26.8
