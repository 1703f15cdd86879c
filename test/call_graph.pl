#!/usr/bin/perl
#
# The calls between pg_tenure's source files must run one way only: which
# file defines each function declared in src/pg_tenure.h, which other
# files call it, and no cycle among them.  And state.c alone touches the
# shared lease table: no other file takes an LWLock or sets up shared
# memory.
# Prints the edges; exits 1 on a cycle or a lease-table access outside
# state.c.
#
#   perl test/call_graph.pl [SOURCE_TREE]

use strict;
use warnings;

my $src = shift // '.';

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "call_graph: cannot read $path: $!\n";
	local $/;
	return <$fh>;
}

my $header = slurp("$src/src/pg_tenure.h");
my %declared = map { $_ => 1 } ($header =~ /^extern\s[^;(]*?\b(tenure_\w+)\s*\(/mg);

my %text;
for my $path (glob("$src/src/*.c"))
{
	(my $file = $path) =~ s{.*/}{};
	$text{$file} = slurp($path);
	# drop comments and string literals, which name functions too
	$text{$file} =~ s{/\*.*?\*/}{}gs;
	$text{$file} =~ s{"(?:\\.|[^"\\])*"}{""}g;
}

my %defined_in;
for my $file (keys %text)
{
	$defined_in{$1} = $file
	  while $text{$file} =~ /^(tenure_\w+)\(/mg;
}

my %edges;
for my $file (sort keys %text)
{
	for my $fn (sort keys %declared)
	{
		my $home = $defined_in{$fn} or next;
		next if $home eq $file;
		$edges{$file}{$home} = 1 if $text{$file} =~ /\b\Q$fn\E\s*\(/;
	}
}

for my $file (sort keys %edges)
{
	print "call_graph: $file -> ", join(', ', sort keys %{ $edges{$file} }), "\n";
}

# depth-first search for a back edge
my (%state, @stack, $cycle);
sub visit
{
	my ($node) = @_;
	$state{$node} = 1;
	push @stack, $node;
	for my $next (sort keys %{ $edges{$node} // {} })
	{
		if (($state{$next} // 0) == 1)
		{
			my @from = @stack;
			shift @from while $from[0] ne $next;
			$cycle //= join(' -> ', @from, $next);
		}
		visit($next) unless $state{$next};
	}
	pop @stack;
	$state{$node} = 2;
}
visit($_) for grep { !$state{$_} } sort keys %text;

my @outside;
for my $file (sort keys %text)
{
	next if $file eq 'state.c';
	push @outside, "$file: $1"
	  while $text{$file} =~ /\b(LWLockAcquire|LWLockConditionalAcquire|ShmemInitHash|ShmemInitStruct)\b/g;
}

if ($cycle)
{
	print STDERR "call_graph: cycle: $cycle\n";
	exit 1;
}
print "call_graph: no cycle\n";
if (@outside)
{
	print STDERR "call_graph: lease table touched outside state.c: $_\n" for @outside;
	exit 1;
}
print "call_graph: only state.c touches the lease table\n";
